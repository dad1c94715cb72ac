#!/usr/bin/python3
"""Reference values for src/core/discrepancy_test.cc from scipy.stats.qmc.discrepancy.

Run with the Debian interpreter that has python3-scipy (scipy 1.10.1):
    /usr/bin/python3 tools/discrepancy_reference.py
and paste its output into the test. Two kinds of point sets:
  * "literal" sets, printed as C++ array literals (repr() round-trips every double exactly);
  * "formula" sets, x[i][k] = ((i * a_k + c_k) % m) / m, which C++ rebuilds bit-identically (one correctly
    rounded division of two small integers), so larger sets need no pasting.
"""
import numpy as np
import scipy
from scipy.stats import qmc


def cpp_array(name, x):
    values = ", ".join(repr(float(v)) for v in x.ravel())
    return f"constexpr double {name}[] = {{{values}}};"


def formula_points(n, d, m):
    a = [1 + 2 * k + (k * k) % 7 for k in range(d)]
    c = [(3 * k + 1) % m for k in range(d)]
    return np.array([[((i * a[k] + c[k]) % m) / m for k in range(d)] for i in range(n)], dtype=np.float64)


def report(name, x):
    cd = qmc.discrepancy(x, method="CD")
    l2 = qmc.discrepancy(x, method="L2-star")
    print(f"// {name}: n={x.shape[0]} d={x.shape[1]}")
    print(f"//   CD      = {cd!r}")
    print(f"//   L2-star = {l2!r}")
    return cd, l2


def main():
    print(f"// scipy {scipy.__version__}, numpy {np.__version__}")
    literal = {
        "kOnePoint1d": np.array([[0.3]]),
        "kFive1d": np.array([[0.0], [0.25], [0.5], [0.75], [1.0]]),
        # The example in scipy's discrepancy() docstring (6 points of a 6x6 Latin square, scaled).
        "kDocExample2d": (np.array([[1, 3], [2, 6], [3, 2], [4, 5], [5, 1], [6, 4]]) - 0.5) / 6.0,
        "kRandom3d": np.random.default_rng(1234).random((7, 3)),
        "kRandom5d": np.random.default_rng(99).random((4, 5)),
        "kCorners2d": np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.5, 0.5]]),
    }
    for name, x in literal.items():
        print(cpp_array(name, x))
        report(name, x)
        print()
    for n, d, m in [(50, 6, 53), (200, 1, 211), (128, 4, 131)]:
        report(f"formula points (n={n}, d={d}, m={m})", formula_points(n, d, m))
        print()


if __name__ == "__main__":
    main()
