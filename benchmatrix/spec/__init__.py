"""The spec: YAML with line numbers, the schema and semantic checks, the matrix of cells, templates and the
--where language."""
