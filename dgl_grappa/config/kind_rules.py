"""The rules of two kinds of job: link prediction and a heterogeneous graph.

Each reads several sections, and each says what its kind needs and what it cannot run with;
:func:`dgl_grappa.config.validate` runs them with the other rules.
"""
from __future__ import annotations

from .data import hetero_schema, select_etypes
from .errors import require as _check
from .tree import Config


def _validate_hetero(cfg: Config) -> None:
    """A heterogeneous graph (``data.name: hetsynth``): its generator, the type and relation names, the model,
    the featureless types, and the settings the heterogeneous runtime does not serve."""
    d, m, t = cfg.data, cfg.model, cfg.train
    schema = hetero_schema(d)
    if schema is None:
        _check(not d.target and not d.etypes,
               f"data.target / data.etypes name node and edge types, but data.name={d.name} is a homogeneous graph; "
               "leave them empty (or use --data.name=hetsynth)")
        _check(m.name != "rgcn", f"model.name=rgcn needs a heterogeneous graph, but data.name={d.name} is homogeneous; "
                                 "use --data.name=hetsynth, or --model.name=sage")
        return
    h = d.hetsynth
    for key in ("num_papers", "num_authors", "num_fields", "feat_dim", "fields_per_paper"):
        _check(getattr(h, key) >= 1, f"data.hetsynth.{key}={getattr(h, key)} must be >= 1")
    _check(h.num_papers >= 10, f"data.hetsynth.num_papers={h.num_papers} is too small; use at least 10")
    _check(h.num_classes >= 2, f"data.hetsynth.num_classes={h.num_classes} must be >= 2")
    _check(h.fields_per_paper <= h.num_fields, f"data.hetsynth.fields_per_paper={h.fields_per_paper} is more than "
                                               f"data.hetsynth.num_fields={h.num_fields}")
    _check(h.papers_per_author > 0 and h.citations >= 0,
           f"data.hetsynth.papers_per_author={h.papers_per_author} must be > 0 and citations={h.citations} >= 0")
    _check(0.0 <= h.homophily <= 1.0, f"data.hetsynth.homophily={h.homophily} must be in [0, 1]")
    _check(h.noise >= 0, f"data.hetsynth.noise={h.noise} must be >= 0")
    _check(0 < h.train_frac < 1 and 0 <= h.val_frac < 1 and h.train_frac + h.val_frac < 1,
           f"data.hetsynth.train_frac={h.train_frac} / val_frac={h.val_frac} must be fractions that leave a test split")
    for ft in h.feat_types:
        _check(ft in schema["ntypes"], f"data.hetsynth.feat_types entry {ft!r} is not a node type of hetsynth "
                                       f"({', '.join(schema['ntypes'])}); list node types, e.g. [paper]")
    target = d.target or schema["labelled"][0]
    _check(target in schema["ntypes"], f"data.target={target!r} is not a node type of data.name={d.name} "
                                       f"({', '.join(schema['ntypes'])}); use --data.target={schema['labelled'][0]}")
    _check(target in schema["labelled"],
           f"data.target={target} has no labels (the labelled node type of data.name={d.name} is "
           f"{', '.join(schema['labelled'])}); use --data.target={schema['labelled'][0]}")
    kept = select_etypes(d.etypes, schema["etypes"])  # a name that is no relation is a one-line error
    used = {target} | {e[0] for e in kept} | {e[2] for e in kept}  # the node types the kept relations touch
    _check(m.name == "rgcn", f"data.name={d.name} is a heterogeneous graph, which model.name={m.name} cannot train; "
                             "use --model.name=rgcn (a GraphConv per relation, summed)")
    bare = [n for n in schema["ntypes"] if n in used and n not in schema["featured"]]
    _check(not bare or m.embed,
           f"node types {', '.join(bare)} of data.name={d.name} have no features, so model.embed=false leaves them "
           "without input; set --model.embed=true (a learnable row per node of those types)")
    refused = [
        (t.task == "node", f"train.task={t.task}", "--train.task=node"),
        (t.mode == "minibatch", f"train.mode={t.mode}", "--train.mode=minibatch"),
        (cfg.grappa.correction == "none", f"grappa.correction={cfg.grappa.correction}", "--grappa.correction=none"),
        (set(cfg.compare.variants) <= {"none"}, f"compare.variants=[{','.join(cfg.compare.variants)}]",
         "--compare.variants=[none]"),
        (cfg.schedule.k == 0, f"schedule.k={cfg.schedule.k}", "--schedule.k=0"),
        (not cfg.partition.prebuilt and t.eval_mode != "layerwise", "layer-wise evaluation (train.eval_mode=layerwise, "
         "partition.prebuilt)", "--train.eval_mode=whole without partition.prebuilt"),
        (not cfg.run.floor, "run.floor=true", "--run.floor=false"),
    ]
    for ok, what, fix in refused:
        _check(ok, f"data.name={d.name} (a heterogeneous graph) is not trained with {what}: the heterogeneous runtime "
                   f"trains node classification on minibatches with plain gradient averaging; use {fix}")


def _validate_link(cfg: Config) -> None:
    """``train.task: link``: the held-out fractions, the negatives, and the settings link prediction cannot serve."""
    if cfg.train.task != "link":
        return
    lk, t = cfg.link, cfg.train
    _check(0.0 < lk.val_frac < 1.0, f"link.val_frac={lk.val_frac} must be in (0, 1): validation scores held-out edges")
    _check(0.0 < lk.test_frac < 1.0, f"link.test_frac={lk.test_frac} must be in (0, 1): the test scores held-out edges")
    _check(lk.val_frac + lk.test_frac < 1.0,
           f"link.val_frac={lk.val_frac} and link.test_frac={lk.test_frac} hold out {lk.val_frac + lk.test_frac:g} of "
           "the edges, leaving none to train on; make their sum < 1, e.g. --link.val_frac=0.05 --link.test_frac=0.1")
    _check(lk.negatives >= 1, f"link.negatives={lk.negatives} must be >= 1 (negative pairs per positive edge)")
    _check(lk.eval_negatives >= 1, f"link.eval_negatives={lk.eval_negatives} must be >= 1")
    _check(1 <= lk.hits_k <= lk.eval_negatives,
           f"link.hits_k={lk.hits_k} must be in 1..link.eval_negatives={lk.eval_negatives} (with more, every "
           f"held-out edge ranks in the top k); e.g. --link.hits_k={min(10, lk.eval_negatives)}")
    _check(cfg.grappa.correction == "none",
           f"train.task=link with grappa.correction={cfg.grappa.correction}: the corrections weight nodes by their "
           "coverage, and the link loss is a mean over edges; use --grappa.correction=none")
    _check(t.mode == "minibatch", "train.task=link with train.mode=fullgraph: link prediction trains on minibatches of "
                                  "edges and their sampled negatives; use --train.mode=minibatch")
    _check(not cfg.model.embed, "train.task=link with model.embed=true: learnable rows are not wired into link "
                                "prediction; train on the features (--model.embed=false)")
    _check(cfg.schedule.k == 0,
           f"train.task=link with schedule.k={cfg.schedule.k}: a new partitioning would have to be cut from the same "
           "training graph (held-out edges removed), which repartitioning does not do; use --schedule.k=0")
    _check(not cfg.partition.prebuilt and t.eval_mode != "layerwise",
           "train.task=link scores held-out edges on the whole graph in rank 0's memory; layer-wise evaluation "
           "(train.eval_mode=layerwise, partition.prebuilt) is not available with it: use --train.eval_mode=whole "
           "without partition.prebuilt")
