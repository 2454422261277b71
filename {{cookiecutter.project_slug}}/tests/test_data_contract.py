"""The data contract over every config in configs/data/ (yours too, with no new test code).

For each data config whose module writes a small data set (``make_fixture``): it sets up
with consistent metadata and a seeded split; in the slow tier a short run trains, resumes
mid-epoch bitwise equal, exports with parity, predicts alike from raw files with both
backends, and trains on disjoint shards under two ranks (platekit.testing.DataContract).
"""

from platekit.testing import DataContract


class TestDataContract(DataContract):
    pass
