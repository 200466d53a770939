"""Pod status and events: the one writer of status (`statuses`), the event recorder
(`recording`), their SQLite checkpoint (`checkpointing`), and in cluster mode their sync to the
API (`statussync`, `eventposting`) and the mirror pods of static pods (`mirrors`).

Owns: the pods' statuses and events. May import: adapters; no pod work (sinks only read).
"""
