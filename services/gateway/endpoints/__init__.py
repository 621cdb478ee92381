"""Model-serving endpoints in the GraphQL API: their types, queries, mutations and inputs,
and the model folder's definition file."""
