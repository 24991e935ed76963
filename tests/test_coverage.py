"""Coverage math against hand computations and against its random-walk meaning."""

import pytest
import torch

from dgl_grappa.method import coverage as cov

pytestmark = pytest.mark.unit

# Full graph (src -> dst), part A = {0, 1, 2}, part B = {3, 4, 5}:
#   1->0, 2->0, 3->0   0->1   4->2, 0->2
# Part A's local graph (halo dropped) keeps 1->0, 2->0, 0->1, 0->2.
LOCAL_SRC = torch.tensor([1, 2, 0, 0])
LOCAL_DST = torch.tensor([0, 0, 1, 2])
DEG = torch.tensor([3, 1, 2])  # full-graph in-degrees of nodes 0, 1, 2


def test_one_and_two_hops_by_hand_without_self_loops():
    c1 = cov.coverage(LOCAL_SRC, LOCAL_DST, 3, DEG, hops=1, self_loops=False)
    torch.testing.assert_close(c1, torch.tensor([2 / 3, 1.0, 1 / 2]))
    c2 = cov.coverage(LOCAL_SRC, LOCAL_DST, 3, DEG, hops=2, self_loops=False)
    # c2(0) = 2/3 * mean(c1(1), c1(2)); c2(1) = 1 * c1(0); c2(2) = 1/2 * c1(0)
    torch.testing.assert_close(c2, torch.tensor([2 / 3 * 0.75, 2 / 3, 1 / 3]))


def test_one_and_two_hops_by_hand_with_self_loops():
    c1 = cov.coverage(LOCAL_SRC, LOCAL_DST, 3, DEG, hops=1, self_loops=True)
    torch.testing.assert_close(c1, torch.tensor([3 / 4, 1.0, 2 / 3]))
    c2 = cov.coverage(LOCAL_SRC, LOCAL_DST, 3, DEG, hops=2, self_loops=True)
    torch.testing.assert_close(c2, torch.tensor([29 / 48, 7 / 8, 17 / 36]))


def test_zero_hops_and_isolated_nodes():
    torch.testing.assert_close(cov.coverage(LOCAL_SRC, LOCAL_DST, 3, DEG, hops=0), torch.ones(3))
    # node 3 has no in-edges anywhere: nothing is lost; node 4 lost its only in-edge: 0
    src, dst = torch.tensor([0]), torch.tensor([1])
    c = cov.coverage(src, dst, 5, torch.tensor([0, 1, 0, 0, 1]), hops=2, self_loops=False)
    torch.testing.assert_close(c, torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0]))


def test_local_degree_above_global_is_rejected():
    with pytest.raises(ValueError, match="exceeds"):
        cov.local_ratio(torch.tensor([3]), torch.tensor([2]))


def test_coverage_is_the_probability_that_a_random_walk_stays_local():
    """Monte Carlo: L-hop uniform in-neighbour walks on a random graph, a random half local."""
    g = torch.Generator().manual_seed(0)
    n, m, hops = 60, 400, 2
    src, dst = torch.randint(0, n, (m,), generator=g), torch.randint(0, n, (m,), generator=g)
    local = torch.zeros(n, dtype=torch.bool)
    local[torch.randperm(n, generator=g)[: n // 2]] = True
    # local graph = edges between local nodes, relabelled
    keep = local[src] & local[dst]
    new_id = torch.full((n,), -1, dtype=torch.long)
    new_id[local] = torch.arange(int(local.sum()))
    c = cov.coverage(
        new_id[src[keep]],
        new_id[dst[keep]],
        int(local.sum()),
        torch.bincount(dst, minlength=n)[local],
        hops,
        self_loops=False,
    )
    in_nbrs = [src[dst == v] for v in range(n)]
    walks = 4000
    for v in local.nonzero().flatten()[:8].tolist():
        stay = 0
        for _ in range(walks):
            u, ok = v, True
            for _ in range(hops):
                nb = in_nbrs[u]
                if nb.numel() == 0:
                    break
                u = int(nb[torch.randint(0, nb.numel(), (1,), generator=g)])
                if not local[u]:
                    ok = False
                    break
            stay += ok
        assert abs(stay / walks - float(c[new_id[v]])) < 0.03


def test_weights_and_shrinkage():
    w = cov.node_weights(torch.tensor([0.0, 0.5, 1.0]), w_min=0.1)
    torch.testing.assert_close(w, torch.tensor([0.1, 0.5, 1.0]))
    assert float(cov.batch_weight(w)) == pytest.approx(1.6 / 3)
    assert float(cov.shrink(torch.tensor(0.4), 0.25, 1.0)) == pytest.approx(0.55)
    assert float(cov.batch_weight(torch.tensor([]))) == 0.0
    with pytest.raises(ValueError):
        cov.node_weights(w, 0.0)
