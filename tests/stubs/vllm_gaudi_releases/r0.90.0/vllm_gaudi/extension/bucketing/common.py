"""Stand-in release 0.90.0 (our own code): powers-of-two queries, contexts 0 and 1; a singleton, no spec decode."""

from __future__ import annotations


class HPUBucketingManager:
    _instance = None

    def __new__(cls) -> HPUBucketingManager:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def initialize(self, max_num_seqs, max_num_prefill_seqs, block_size, max_num_batched_tokens, max_model_len):
        self.seqs, self.prefill_seqs, self.block = max_num_seqs, max_num_prefill_seqs, block_size
        self.tokens, self.model_len = max_num_batched_tokens, max_model_len
        self.num_hpu_blocks = None

    def generate_prompt_buckets(self) -> None:
        queries, q = [], self.block
        while q <= self.tokens:
            queries.append(q)
            q *= 2
        self.prompt_buckets = [(1, q, c) for q in queries for c in (0, 1)]

    def generate_decode_buckets(self) -> None:
        assert self.num_hpu_blocks is not None
        self.decode_buckets = [(b, 1, self.num_hpu_blocks) for b in (1, 2, 4) if b <= self.seqs]
