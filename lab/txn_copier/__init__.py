"""The lab's transactional copier written with Kafka's Java clients (TxnCopier.java), run with
the clients of a chosen Kafka version: which transaction protocol it speaks (V1, or KIP-890's
V2) is decided by those clients and the broker, not by the monitor."""
