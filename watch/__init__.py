"""The watch: a continuous reader of the pipelines' sink topics that publishes the duplicates
it sees within seconds (docs/design.md, "The watch: duplicates within seconds")."""
