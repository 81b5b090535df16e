"""Everything that touches Spark: the session, typed conversion and the Iceberg writer."""
