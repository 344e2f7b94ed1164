"""PostgreSQL test support: the server, a schema per test, and child "host" processes."""
