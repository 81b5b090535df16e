"""Spark's errors, shortened to what an operator reads in status."""

from __future__ import annotations

from spark_sink.errors import TargetReadError, java_error

PY4J = "\n".join([
    "An error occurred while calling o67.table.",
    ": org.apache.iceberg.exceptions.RESTException: Error occurred while processing GET request",
    "\tat org.apache.iceberg.rest.HTTPClient.execute(HTTPClient.java:321)",
    "\tat java.base/java.lang.Thread.run(Thread.java:840)",
    "Caused by: org.apache.hc.client5.http.HttpHostConnectException: Connect to http://127.0.0.1:41331 failed: "
    "Connection refused",
    "\tat java.base/sun.nio.ch.Net.pollConnect(Native Method)",
    "\t... 74 more",
])


def test_a_java_error_is_its_exception_and_root_cause_without_packages_or_frames():
    assert java_error(Exception(PY4J)) == (
        "RESTException: Error occurred while processing GET request (caused by HttpHostConnectException: Connect "
        "to http://127.0.0.1:41331 failed: Connection refused)")


def test_an_error_that_is_not_javas_is_left_as_it_is():
    assert java_error(OSError("no route to host")) == "no route to host"


def test_a_target_that_cannot_be_read_is_named_and_may_pass():
    error = TargetReadError("rest.shop.orders", Exception(PY4J))
    assert str(error).startswith("target rest.shop.orders: cannot read its state: RESTException: ")
    assert error.transient and "\tat " not in str(error)
