"""Kafka's console consumer piped into its console producer, SIGKILLed while records flow."""
