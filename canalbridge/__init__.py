"""canalbridge: a CDC bridge from Alibaba Canal into Iceberg tables through Spark."""

__version__ = "0.1.0"
