"""Stand-in release 0.91.0 (our own code): queries every 4 blocks, context 0 only; instances, spec decode taken."""

from __future__ import annotations


class HPUBucketingManager:
    def initialize(
        self,
        max_num_seqs,
        max_num_prefill_seqs,
        block_size,
        max_num_batched_tokens,
        max_model_len,
        num_speculative_tokens=0,
    ):
        self.seqs, self.block, self.tokens = max_num_seqs, block_size, max_num_batched_tokens
        self.num_hpu_blocks = None

    def generate_prompt_buckets(self) -> None:
        step = 4 * self.block
        self.prompt_buckets = [(1, q, 0) for q in range(step, self.tokens + 1, step)]

    def generate_decode_buckets(self) -> None:
        self.decode_buckets = [(b, 1, self.num_hpu_blocks // 2) for b in (1, 8) if b <= self.seqs]
