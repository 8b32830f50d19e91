"""Corpus runs: what each head does across many texts (readers, the per-batch function, merge, embedded and Ray
engines, the query/key space)."""
