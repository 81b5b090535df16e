"""What the source's tables look like: DDL read into schema changes, the columns each row was written with, and a
target's columns as a channel stages into it."""
