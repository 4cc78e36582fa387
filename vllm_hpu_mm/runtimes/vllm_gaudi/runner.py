"""How vllm-gaudi's model runner drives its bucket lookup, step by step: which lookups a step makes, which bucket
each forward runs in, and which shape actually runs (our own code, modelled on ``v1/worker/hpu_model_runner.py``
@ 091bbadd; the lookups themselves are :class:`.common.BucketLookup`).

Prefill (``_extract_prefill_batch_contents``, ``_can_merge_prefill_contents``, ``_bucketize_2d_prompt``,
``_form_prefill_batch``): the step's prefill requests are walked in order; each is merged into the open batch when
neither has a context (a prefix-cache hit or an earlier chunk) and the merged batch's bucket (looked up with context
0, twice) has at most ``VLLM_PROMPT_BS_BUCKET_MAX`` sequences and at most ``max_num_batched_tokens`` tokens. That
merge check also runs for the first request against the empty batch, so every step looks up ``(1, query, 0)`` before
the real ``(batch, longest query, most context blocks)``. Under ``VLLM_MERGED_PREFILL`` the batch is one sequence
of the summed queries (``_bucketize_merged_prompt``).

Decode (``_create_decode_input_data``, ``get_habana_paged_attn_buffers``): each sequence needs
``ceil((context + 1) / block_size)`` blocks; the batch bucket comes from ``(sequences, total blocks)`` and the block
bucket from a second lookup at the padded batch. A block list longer than its bucket is not cut (``pad_list``), so
it runs at its own length, a shape no warm-up prepared. With contiguous PA the runner looks up the highest block id
+ 1, which depends on the allocator; it is modelled as the blocks in use (a lower bound).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from vllm_hpu_mm.engine import Bucket, EngineShape, GraphRun, PrefillChunk
from vllm_hpu_mm.runtimes.vllm_gaudi.common import BucketLookup, prefill_seqs
from vllm_hpu_mm.runtimes.vllm_gaudi.config import BucketingConfig
from vllm_hpu_mm.runtimes.vllm_gaudi.exponential import decode_block_ceiling

__all__ = ["RunnerLookup"]

#: Most single-chunk forwards a lookup keeps (past it, it starts again: memory does not grow with the traffic).
ALONE_KEPT = 1 << 16


class RunnerLookup:
    """vllm-gaudi's runner over its bucket lookup (:class:`~vllm_hpu_mm.engine.TextLookup`)."""

    def __init__(
        self,
        cfg: BucketingConfig,
        shape: EngineShape,
        generated: tuple[tuple[Bucket, ...], tuple[Bucket, ...]] | None = None,
        listed: tuple[int, int] | None = None,
    ) -> None:
        """``listed``: the (prompt, decode) buckets the strategy or file lists where it warms more (speculative
        decoding; :func:`~vllm_hpu_mm.runtimes.base.listed_text_shapes`); None: it warms what it lists."""
        self.lookup = BucketLookup(cfg, shape, generated)
        self.shape = shape
        self.merged = cfg.merged_prefill
        self.contiguous = cfg.contiguous_pa
        # hpu_model_runner.py __init__: max_prefill_batch_size is VLLM_PROMPT_BS_BUCKET_MAX or 1, merged or not
        self.max_prefill_batch = 1 if cfg.prompt_bs_max is None else cfg.prompt_bs_max
        prefill_seqs(cfg, shape)  # the manager's check of that value
        self.decode_block_cap = decode_block_ceiling(shape, cfg.release)
        # platform.py check_and_update_config at every tag from v0.11.2 to 091bbadd (lines 125-127 @ f9b64469, 241-243
        # @ 091bbadd): contiguous PA sets enable_prefix_caching = False (before v0.18.1rc1 not under unified
        # attention, which is refused here)
        self.prefix_caching_off = (
            f"VLLM_CONTIGUOUS_PA: {cfg.release} turns prefix caching off (platform.py), so every prompt token is "
            "computed and the traffic's cached_tokens are not hits"
            if cfg.contiguous_pa
            else None
        )
        # generate_buckets' prompt filter before v0.19.0 (common.py @ da2ce404, 67e4a6b1; merged prefill has its own)
        self.prompt_fits_model_len = cfg.release.prompt_filter == "query+ctx" and not cfg.merged_prefill
        #: One chunk's forward alone (query, context blocks) -> its run, while no fallback is added (their count).
        self._alone: dict[tuple[int, int], GraphRun] = {}
        self._alone_state = 0
        self.warmed = frozenset(
            [("prompt", b) for b in self.lookup.prompt] + [("decode", b) for b in self.lookup.decode]
        )
        self.listed = listed

    def fallbacks(self) -> list[tuple[str, Bucket]]:
        return list(self.lookup.added)

    def fallback_count(self) -> int:
        """``len(fallbacks())`` without the copy (a replay's memos ask it at every step)."""
        return len(self.lookup.added)

    def _bucketize(self, queries: list[int], ctx_blocks: list[int]) -> Bucket:
        if self.merged:  # _bucketize_merged_prompt
            seq = self.lookup.find_prompt(1, sum(queries), sum(ctx_blocks))[1]
            return (1, seq, math.ceil(sum(ctx_blocks) / 32) * 32)
        return self.lookup.find_prompt(len(queries), max(queries), max(ctx_blocks, default=0))

    def _can_merge(self, batch: list[PrefillChunk], chunk: PrefillChunk) -> bool:
        if (batch and chunk.context > 0) or any(c.context > 0 for c in batch):
            return False
        queries = [c.query for c in batch] + [chunk.query]
        if not self.merged and len(queries) > self.max_prefill_batch:
            return False  # BucketingFailedException before any lookup
        self._bucketize(queries, [])  # looked up twice, as the runner does (a fallback is generated by the first)
        bs, seq, _ = self._bucketize(queries, [])
        return bs <= self.max_prefill_batch and bs * seq <= self.shape.max_num_batched_tokens

    def prefill(self, chunks: tuple[PrefillChunk, ...]) -> list[GraphRun]:
        if not self.merged and self.max_prefill_batch == 1:
            return self._prefill_alone(chunks)
        return self._prefill_walk(chunks)

    def _prefill_alone(self, chunks: tuple[PrefillChunk, ...]) -> list[GraphRun]:
        """:meth:`_prefill_walk` where a batch holds one sequence (the default): each chunk is its own forward, and
        the merge check looks up the first chunk alone (twice) and no other (two sequences exceed the batch before
        any lookup): the same lookups in the same order, without the walk (a replay's every step comes here)."""
        find, block, added = self.lookup.find_prompt, self.shape.block_size, self.lookup.added
        runs = []
        for k, c in enumerate(chunks):
            if not k:
                find(1, c.query, 0)
                find(1, c.query, 0)
            if len(added) != self._alone_state:  # a fallback changed what a lookup answers
                self._alone.clear()
                self._alone_state = len(added)
            ctx = math.ceil(c.context / block)
            run = self._alone.get((c.query, ctx))
            if run is None:
                run = _alone_run(c.query, ctx, find(1, c.query, ctx))
                if len(added) == self._alone_state:  # generated nothing: asked again in this state, it would not
                    if len(self._alone) >= ALONE_KEPT:
                        self._alone.clear()
                    self._alone[(c.query, ctx)] = run
            runs.append(run)
        return runs

    def _prefill_walk(self, chunks: tuple[PrefillChunk, ...]) -> list[GraphRun]:
        batches: list[list[PrefillChunk]] = [[]]
        for chunk in chunks:
            if self._can_merge(batches[-1], chunk):
                batches[-1].append(chunk)
            else:
                batches.append([chunk])
        block = self.shape.block_size
        runs = []
        for batch in batches:
            if not batch:
                continue
            queries = [c.query for c in batch]
            ctx = [math.ceil(c.context / block) for c in batch]
            bucket = self._bucketize(queries, ctx)
            if self.merged:
                ran = (1, max(bucket[1], sum(queries)), max(bucket[2], sum(ctx)))
            else:
                ran = (max(bucket[0], len(batch)), max(bucket[1], max(queries)), max(bucket[2], max(ctx)))
            runs.append(GraphRun("prompt", bucket, ran, len(batch), sum(queries), sum(ctx)))
        return runs

    def decode(self, sequences: int, blocks: int) -> GraphRun:
        # each sequence holds ceil((context + 1) / block_size) blocks (_create_decode_input_data); contiguous PA looks
        # up the highest block id + 1 instead: at least the blocks in use (the allocator decides the rest)
        padded = self.lookup.find_decode(sequences, blocks)[0]
        return _decode_run(sequences, blocks, (padded, 1, self.lookup.find_decode(padded, blocks)[2]))

    def alone(self, chunks: Sequence[tuple[int, int]], decodes: Sequence[tuple[int, int]],
              ) -> tuple[list[GraphRun], list[GraphRun]] | None:  # fmt: skip
        """Each chunk's forward ((query tokens, context blocks), alone in its forward) and each decode's forward
        ((sequences, blocks)) as :meth:`prefill` and :meth:`decode` answer them in this state, where none of those
        look-ups generates a fallback: then every answer is the same in any order and whatever the step around a
        chunk (a step's merge check looks up its first chunk at no context, which a bucket covering the chunk
        covers). None, with nothing changed, where one would generate a fallback or where a step's chunks may merge
        into one forward."""
        if self.merged or self.max_prefill_batch != 1:
            return None
        covering_prompt, covering_decode = self.lookup.covering_prompt, self.lookup.covering_decode
        prefill = []
        for query, ctx in chunks:
            bucket = covering_prompt(1, query, ctx)
            if bucket is None:
                return None
            prefill.append(_alone_run(query, ctx, bucket))
        decode = []
        for sequences, blocks in decodes:
            first = covering_decode(sequences, blocks)
            second = covering_decode(first[0], blocks) if first is not None else None
            if first is None or second is None:
                return None
            decode.append(_decode_run(sequences, blocks, (first[0], 1, second[2])))
        return prefill, decode


def _alone_run(query: int, ctx: int, bucket: Bucket) -> GraphRun:
    """One chunk's forward alone in ``bucket`` (a shape larger than it runs at its own size)."""
    return GraphRun("prompt", bucket, (max(bucket[0], 1), max(bucket[1], query), max(bucket[2], ctx)), 1, query, ctx)


def _decode_run(sequences: int, blocks: int, bucket: Bucket) -> GraphRun:
    """A decode forward in ``bucket`` (a block list longer than it runs at its own length)."""
    return GraphRun("decode", bucket, (bucket[0], 1, max(bucket[2], blocks)), sequences, sequences, blocks)
