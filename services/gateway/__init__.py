"""Gateway: GraphQL API, authentication, tenancy and admin command handling."""
