"""The two graphs of an artifact, written as plain torch modules over a Hugging Face model's weights.

Why not export the Hugging Face forward itself: its cache objects do not trace to a clean graph,
and we want a graph shape that suits beam search.

* ``EncoderGraph``: ``input_ids, attention_mask -> cross.{i}.key, cross.{i}.value`` for every
  decoder layer. The cross-attention projections run once per batch, here, and the decoder never
  sees the encoder's hidden states.
* ``DecoderGraph``: one graph for every step, step 0 included (a zero-length past). There is no
  ``If`` node, so dynamic quantization reaches every MatMul, and no second decoder file holding the
  same weights again. Cross-attention K/V have batch ``B``; the tokens have batch ``B * beams``:
  queries are regrouped per sentence, so cross K/V are never copied per beam.

Shapes (N = batch * beams, T new tokens, P past length, S source length, H heads, D head size,
K candidates, M banned ids per row, C cache positions >= P, R cache slots >= N)::

    decoder inputs : input_ids (N, T), encoder_attention_mask (B, S), top_k_slots (K,), logit_rows (L,),
                     banned_ids (N, M), banned_values (N, M), cache_index (N, P),
                     cross.{i}.key / .value (B, H, S, D), cache.{i}.key / .value (H, C, R, D)
    decoder outputs: logits (L, V) after the bans for the last new token of the first L rows,
                     top_logprobs (N, K), top_ids (N, K), log_mass (N, 1), new.{i}.key / .value (H, T, N, D)

``logit_rows`` says how many rows of the full logits to return: 0 when the search takes the top-k
candidates, N when it needs the whole vocabulary (it bans nothing in the graph then). ONNX Runtime
holds every graph output until the run ends, fetched or not, so an unconditional ``(N, V)`` output
kept 16 MiB alive at 64 rows through the rest of the step (peak RSS -14 MiB on the engine benchmark
without it; BENCHMARKS.md).

The self-attention cache is the worker's (``worker/engine/inference.py``, ``SlotCache``): it writes
each step's ``new`` K/V into its buffers in place, and the graph reads row n's past through
``cache_index`` (``past_keys``), so beams that move copy nothing and no step returns a whole cache.
Attention takes the past and the new tokens apart (one softmax over both), so the cache is never
concatenated either.

The search's bans (suppressed ids, EOS before the minimum length, repeated n-grams) reach the graph
as ``banned_values`` (-inf, or 0 for padding) written at ``banned_ids`` into the logits, so the top-k
candidates are exact whatever is banned. ``top_logprobs`` are renormalized over what the bans left, as
``generate`` scores with ``renormalize_logits`` (every Helsinki-NLP model asks for it); ``log_mass``
(the log of the probability the bans left) turns them back into log-probabilities of the whole
vocabulary for the models that do not renormalize (``top_k_after_bans``). Every log-sum-exp is read off
a LogSoftmax: ONNX Runtime's ReduceLogSumExp took 18 ms on (64, 65001), and LogSoftmax computes each
row alone, where ReduceSum splits rows over threads by the batch's shape (the last bits of a
sentence's score then depend on its batch).

The token embedding and the LM head share one ``(d_model, vocab)`` tensor when the model ties
them: the LM head is a plain MatMul with it and the lookup is a Gather along axis 1, so the
weight is stored once and the quantizer sees a MatMul with an initializer. The stored graphs then take
the looked-up rows as an input instead (``token_rows``: ``weights.token_rows_as_input``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

# A large negative bias that is still finite in fp16, so masked scores never become NaN.
MASK_VALUE = -65504.0


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(batch, seq, H*D) -> (batch, H, seq, D)."""
    return x.reshape(x.shape[0], x.shape[1], heads, -1).transpose(1, 2)


def _merge(x: torch.Tensor) -> torch.Tensor:
    """(batch, H, seq, D) -> (batch, seq, H*D)."""
    return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)


class TokenTable(nn.Module):
    """Token embedding and LM head over one stored tensor when the model ties them."""

    def __init__(self, embedding: torch.Tensor, lm_head: torch.Tensor, scale: float, logit_bias: torch.Tensor | None):
        super().__init__()
        self.tied = lm_head is embedding or torch.equal(lm_head, embedding)
        self.table_t = nn.Parameter(embedding.detach().t().contiguous(), requires_grad=False)  # (d, V)
        if not self.tied:
            self.head_t = nn.Parameter(lm_head.detach().t().contiguous(), requires_grad=False)
        self.scale = scale
        self.logit_bias = None if logit_bias is None else nn.Parameter(logit_bias.detach().reshape(-1), False)

    def lookup(self, ids: torch.Tensor) -> torch.Tensor:
        """(batch, seq) ids -> (batch, seq, d)."""
        vectors = torch.index_select(self.table_t, 1, ids.reshape(-1)).t()
        vectors = vectors.reshape(ids.shape[0], ids.shape[1], -1)
        return vectors * self.scale if self.scale != 1.0 else vectors

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """(N, d) -> (N, V)."""
        out = hidden @ (self.table_t if self.tied else self.head_t)
        return out + self.logit_bias if self.logit_bias is not None else out


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    """Scaled dot-product attention: q (b, H, t, D), k/v (b, H, s, D), bias broadcast to (b, H, t, s)."""
    scores = torch.matmul(q, k.transpose(2, 3))
    if scale != 1.0:
        scores = scores * scale
    weights = torch.softmax(scores + bias, dim=-1)
    return torch.matmul(weights, v)


def attend_per_sentence(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, scale: float):
    """Cross-attention for q (B*beams, H, T, D) against k/v (B, H, S, D) without repeating k/v per beam."""
    n, heads, t, d = q.shape
    b = k.shape[0]
    grouped = q.reshape(b, -1, heads, t, d).transpose(1, 2).reshape(b, heads, -1, d)  # (B, H, beams*T, D)
    out = attend(grouped, k, v, bias, scale)
    return out.reshape(b, heads, -1, t, d).transpose(1, 2).reshape(n, heads, t, d)


def past_keys(cache: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Each row's past K or V from the slot cache ``(H, C, R, D)`` (position p of slot r at ``p * R + r``
    of its flattened middle axes): ``index (N, P)`` says where row n's ancestor left position p.
    -> ``(H, N, P, D)``. A beam that moves changes its row of ``index``; the cache is never copied."""
    heads, _, _, size = cache.shape
    return cache.reshape(int(heads), -1, int(size))[:, index]  # H and D are fixed: no shape arithmetic


def top_k_chunk(size: int) -> tuple[int, int]:
    """``exact_top_k``'s chunk length for rows of ``size`` ids, and the -inf padding it needs: the divisor
    of ``size`` nearest sqrt(size / 8), where its two TopKs read about as much each at 8 candidates (141
    for 65001 ids), or that length itself with padding when no divisor lies within a factor of 2."""
    target = math.sqrt(size / 8)
    near = [d for d in range(max(1, math.ceil(target / 2)), math.floor(2 * target) + 1) if size % d == 0]
    if near:
        return min(near, key=lambda d: abs(math.log(d / target))), 0
    chunk = max(1, round(target))
    return chunk, -size % chunk


def exact_top_k(scores: torch.Tensor, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The k = ``len(slots)`` largest of each row of ``scores (N, V)`` and their ids, largest first and
    equal values in id order, as one TopK over the vocabulary gives them, in two stages. The k chunks
    of ids with the largest maxima (equal maxima: the earlier chunk) hold the k largest values, because
    a value outside them is beaten by each of those k maxima or tied by one at a lower id; so the second
    TopK reads k chunks, not the vocabulary. ONNX Runtime's TopK over (64, 65001) took 5.5-7.2 ms, a
    tenth of an INT8 decoder step; the two stages 2.0-2.9 ms (BENCHMARKS.md). Chunks of -inf past the
    real ones let k exceed their number; ids past V read as -inf, after every real id."""
    rows, size = scores.shape
    k = slots.shape[0]
    chunk, padding = top_k_chunk(int(size))
    padded = nn.functional.pad(scores, (0, padding), value=float("-inf")) if padding else scores
    maxima = padded.reshape(rows, -1, chunk).amax(dim=-1)
    beyond = torch.full_like(slots, float("-inf"), dtype=scores.dtype).expand(rows, -1)
    chunks = torch.topk(torch.cat([maxima, beyond], dim=1), k, dim=-1).indices.sort(dim=-1).values  # (N, k)
    ids = (chunks.unsqueeze(2) * chunk + torch.arange(chunk)).reshape(rows, -1)  # the k chunks, in id order
    candidates = torch.where(ids < size, scores.gather(1, ids.clamp(max=size - 1)), float("-inf"))
    values, at = torch.topk(candidates, k, dim=-1)
    return values, ids.gather(1, at)


def top_k_after_bans(
    logits: torch.Tensor, banned_ids: torch.Tensor, banned_values: torch.Tensor, slots: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The logits after the bans (-inf at each); the k = ``len(slots)`` best log-probabilities of each
    row after the bans, renormalized over what the bans left, and their ids; ``log_mass (N, 1)``, the
    log of the probability the bans left. A padding entry of the bans (value 0) names an id its row does
    not ban, and the graph writes that id's own logit back.

    One log-softmax over the vocabulary, not two (the second took 2 ms of a 75 ms INT8 step at 64 rows):
    the candidates are the top logits after the bans less the log-sum-exp of what the bans left, read
    off the log-softmax at the best id; the bans' share is a log-softmax of that log-sum-exp against the
    few banned logits, which never cancels, even when a banned id held nearly all the probability. The
    bans are written into the logits themselves: their values are read first (the written values depend
    on them), and nothing else reads the logits after, so ONNX Runtime writes in place instead of
    copying (N, V) floats (2 ms at 64 rows; BENCHMARKS.md)."""
    at_bans, is_ban = logits.gather(1, banned_ids), banned_values < 0
    allowed = logits.scatter(1, banned_ids, torch.where(is_ban, banned_values, at_bans))
    top, ids = exact_top_k(allowed, slots)
    log_sum = top[:, :1] - allowed.log_softmax(-1).gather(1, ids[:, :1])
    banned = torch.where(is_ban, at_bans, float("-inf"))
    return allowed, top - log_sum, ids, torch.cat([log_sum, banned], dim=1).log_softmax(-1)[:, :1]


def padding_bias(mask: torch.Tensor) -> torch.Tensor:
    """(B, S) 1/0 mask -> (B, 1, 1, S) additive bias."""
    return ((1.0 - mask.to(torch.float32)) * MASK_VALUE)[:, None, None, :]


def causal_bias(past: int | torch.Tensor, new: int | torch.Tensor) -> torch.Tensor:
    """(1, 1, T, P+T): new token t sees the past and new tokens up to itself."""
    query = torch.arange(new)[:, None] + past
    key = torch.arange(past + new)[None, :]
    return torch.where(key <= query, 0.0, MASK_VALUE)[None, None]


class Projections(nn.Module):
    """q/k/v/o Linear layers of one attention block, borrowed from the Hugging Face module."""

    def __init__(self, q: nn.Module, k: nn.Module, v: nn.Module, o: nn.Module, heads: int, scale: float):
        super().__init__()
        self.q, self.k, self.v, self.o = q, k, v, o
        self.heads, self.scale = heads, scale

    def self_attention(self, h: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        q, k, v = (_heads(p(h), self.heads) for p in (self.q, self.k, self.v))
        return self.o(_merge(attend(q, k, v, bias, self.scale)))

    def cached_self_attention(self, h, cache_k, cache_v, index, bias):
        """Self-attention of the new tokens over their past, read from the slot cache (``past_keys``), and
        over themselves; returns the output and the new tokens' K/V ``(H, T, N, D)`` for the worker to
        write into the cache. Heads lead the batch dimensions, so the gathered past is never transposed."""
        q, k, v = (_heads(p(h), self.heads).transpose(0, 1) for p in (self.q, self.k, self.v))  # (H, N, T, D)
        past_k, past_v = past_keys(cache_k, index), past_keys(cache_v, index)  # (H, N, P, D)
        scores = torch.cat([torch.matmul(q, past_k.transpose(2, 3)), torch.matmul(q, k.transpose(2, 3))], dim=-1)
        if self.scale != 1.0:
            scores = scores * self.scale
        weights = torch.softmax(scores + bias.transpose(0, 1), dim=-1)
        past_len = index.shape[1]
        out = torch.matmul(weights[..., :past_len], past_v) + torch.matmul(weights[..., past_len:], v)
        return self.o(_merge(out.transpose(0, 1))), k.transpose(1, 2), v.transpose(1, 2)

    def cross_kv(self, encoded: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _heads(self.k(encoded), self.heads), _heads(self.v(encoded), self.heads)

    def cross_attention(self, h, k, v, bias):
        q = _heads(self.q(h), self.heads)
        return self.o(_merge(attend_per_sentence(q, k, v, bias, self.scale)))


# --------------------------------------------------------------------------------------------------
# Marian and M2M100/NLLB: BART-shaped layers; Marian normalises after each block, M2M100 before.


class BartLayers(nn.Module):
    """Encoder and decoder stacks of a Marian or M2M100 model, with our attention."""

    def __init__(self, model: nn.Module, *, pre_norm: bool):
        super().__init__()
        base = model.get_encoder(), model.get_decoder()
        self.encoder, self.decoder = base
        self.pre_norm = pre_norm
        self.enc_attn = nn.ModuleList(self._proj(layer.self_attn) for layer in self.encoder.layers)
        self.dec_self = nn.ModuleList(self._proj(layer.self_attn) for layer in self.decoder.layers)
        self.dec_cross = nn.ModuleList(self._proj(layer.encoder_attn) for layer in self.decoder.layers)
        # mBART normalises the embeddings before the first layer; Marian and M2M100 do not.
        self.enc_embedding_norm = getattr(self.encoder, "layernorm_embedding", None)
        self.dec_embedding_norm = getattr(self.decoder, "layernorm_embedding", None)

    @staticmethod
    def _proj(attn: nn.Module) -> Projections:
        return Projections(attn.q_proj, attn.k_proj, attn.v_proj, attn.out_proj, attn.num_heads, attn.head_dim**-0.5)

    def _block(self, h: torch.Tensor, norm: nn.Module, fn) -> torch.Tensor:
        if self.pre_norm:
            return h + fn(norm(h))
        return norm(h + fn(h))

    @staticmethod
    def _ffn(layer: nn.Module):
        return lambda x: layer.fc2(layer.activation_fn(layer.fc1(x)))

    def encode(self, h: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        if self.enc_embedding_norm is not None:
            h = self.enc_embedding_norm(h)
        for layer, attn in zip(self.encoder.layers, self.enc_attn):
            h = self._block(h, layer.self_attn_layer_norm, lambda x, a=attn: a.self_attention(x, bias))
            h = self._block(h, layer.final_layer_norm, self._ffn(layer))
        return self.encoder.layer_norm(h) if self.pre_norm else h

    def decode(self, h, bias, cross_bias, cross, past, cache_index):
        if self.dec_embedding_norm is not None:
            h = self.dec_embedding_norm(h)
        present = []
        for i, layer in enumerate(self.decoder.layers):
            kv: list[torch.Tensor] = []

            def self_attn(x, i=i, kv=kv):
                out, k, v = self.dec_self[i].cached_self_attention(x, past[2 * i], past[2 * i + 1], cache_index, bias)
                kv += [k, v]
                return out

            h = self._block(h, layer.self_attn_layer_norm, self_attn)
            cross_k, cross_v = cross[2 * i], cross[2 * i + 1]
            h = self._block(
                h,
                layer.encoder_attn_layer_norm,
                lambda x, i=i, k=cross_k, v=cross_v: self.dec_cross[i].cross_attention(x, k, v, cross_bias),
            )
            h = self._block(h, layer.final_layer_norm, self._ffn(layer))
            present += kv
        return (self.decoder.layer_norm(h) if self.pre_norm else h), present


class TablePositions(nn.Module):
    """A table indexed by absolute position (plus a fixed ``offset``; mBART's is 2), padding ignored:
    Marian's sinusoidal table, mBART's learned ones."""

    def __init__(self, table: torch.Tensor, offset: int = 0):
        super().__init__()
        self.table = nn.Parameter(table.detach().clone(), requires_grad=False)
        self.offset = offset

    def __call__(self, ids: torch.Tensor, past: int | torch.Tensor = 0) -> torch.Tensor:
        positions = torch.arange(ids.shape[1]) + past + self.offset
        return self.table[positions][None]


class M2M100Positions(nn.Module):
    """M2M100: positions count non-pad tokens and start after the padding index (fairseq)."""

    def __init__(self, table: torch.Tensor, padding_idx: int):
        super().__init__()
        self.table = nn.Parameter(table.detach().clone(), requires_grad=False)
        self.padding_idx = padding_idx

    def __call__(self, ids: torch.Tensor, past: int | torch.Tensor = 0) -> torch.Tensor:
        mask = (ids != self.padding_idx).to(torch.int64)
        positions = (torch.cumsum(mask, dim=1) + past) * mask + self.padding_idx
        return self.table[positions]


# --------------------------------------------------------------------------------------------------
# T5: RMS-normalised pre-norm blocks, relative position buckets, unscaled attention.


class T5Layers(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.encoder, self.decoder = model.get_encoder(), model.get_decoder()
        heads = model.config.num_heads
        self.enc_attn = nn.ModuleList(self._proj(b.layer[0].SelfAttention, heads) for b in self.encoder.block)
        self.dec_self = nn.ModuleList(self._proj(b.layer[0].SelfAttention, heads) for b in self.decoder.block)
        self.dec_cross = nn.ModuleList(self._proj(b.layer[1].EncDecAttention, heads) for b in self.decoder.block)
        self.enc_bias = self.encoder.block[0].layer[0].SelfAttention
        self.dec_bias = self.decoder.block[0].layer[0].SelfAttention

    @staticmethod
    def _proj(attn: nn.Module, heads: int) -> Projections:
        return Projections(attn.q, attn.k, attn.v, attn.o, heads, 1.0)

    @staticmethod
    def position_bias(attn: nn.Module, queries: torch.Tensor, keys: torch.Tensor, bidirectional: bool):
        """(1, H, t, s) learned bias for query positions ``queries`` against key positions ``keys``."""
        relative = keys[None, :] - queries[:, None]
        bucket = attn._relative_position_bucket(
            relative,
            bidirectional=bidirectional,
            num_buckets=attn.relative_attention_num_buckets,
            max_distance=attn.relative_attention_max_distance,
        )
        return attn.relative_attention_bias(bucket).permute(2, 0, 1)[None]

    def encode(self, h: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(h.shape[1])
        bias = self.position_bias(self.enc_bias, positions, positions, True) + mask_bias
        for block, attn in zip(self.encoder.block, self.enc_attn):
            h = h + attn.self_attention(block.layer[0].layer_norm(h), bias)
            h = block.layer[-1](h)
        return self.encoder.final_layer_norm(h)

    def decode(self, h, causal, cross_bias, cross, past, cache_index):
        new, past_len = h.shape[1], cache_index.shape[1]
        queries = torch.arange(new) + past_len
        keys = torch.arange(past_len + new)
        bias = self.position_bias(self.dec_bias, queries, keys, False) + causal
        present = []
        for i, block in enumerate(self.decoder.block):
            out, k, v = self.dec_self[i].cached_self_attention(
                block.layer[0].layer_norm(h), past[2 * i], past[2 * i + 1], cache_index, bias
            )
            h = h + out
            h = h + self.dec_cross[i].cross_attention(
                block.layer[1].layer_norm(h), cross[2 * i], cross[2 * i + 1], cross_bias
            )
            h = block.layer[-1](h)
            present += [k, v]
        return self.decoder.final_layer_norm(h), present


# --------------------------------------------------------------------------------------------------
# The exported graphs.


class EncoderGraph(nn.Module):
    def __init__(self, arch: GraphParts):
        super().__init__()
        self.arch = arch

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        a = self.arch
        h = a.tokens.lookup(input_ids)
        if a.source_positions is not None:
            h = h + a.source_positions(input_ids)
        encoded = a.layers.encode(h, padding_bias(attention_mask))
        return tuple(t for proj in a.layers.dec_cross for t in proj.cross_kv(encoded))


class DecoderGraph(nn.Module):
    def __init__(self, arch: GraphParts):
        super().__init__()
        self.arch = arch

    def forward(
        self,
        input_ids: torch.Tensor,
        encoder_attention_mask: torch.Tensor,
        top_k_slots: torch.Tensor,
        logit_rows: torch.Tensor,
        banned_ids: torch.Tensor,
        banned_values: torch.Tensor,
        cache_index: torch.Tensor,
        *caches,
    ):
        """``top_k_slots`` and ``logit_rows``: only their lengths matter. The graph returns the k best
        log-probabilities per row after the bans (log-softmax and TopK in the graph, so the full (rows,
        vocab) logits reach Python only when ``logit_rows`` asks for them)."""
        a = self.arch
        n = len(caches) // 2
        cross, past = caches[:n], caches[n:]
        past_len = cache_index.shape[1]
        h = a.tokens.lookup(input_ids)
        causal = causal_bias(past_len, input_ids.shape[1])
        cross_bias = padding_bias(encoder_attention_mask)
        if a.positions is not None:
            h = h + a.positions(input_ids, past_len)
        h, present = a.layers.decode(h, causal, cross_bias, cross, past, cache_index)
        last = h[:, -1, :]
        if a.output_scale != 1.0:
            last = last * a.output_scale
        logits = a.tokens.logits(last)
        logits, top_logprobs, top_ids, log_mass = top_k_after_bans(logits, banned_ids, banned_values, top_k_slots)
        return (logits[: logit_rows.shape[0]], top_logprobs, top_ids, log_mass, *present)


class GraphParts(nn.Module):
    """What both graphs need from one model: token table, positions (the encoder's own when it has
    them: mBART learns one table per side), layers, output scale."""

    def __init__(
        self,
        tokens: TokenTable,
        positions: nn.Module | None,
        layers: nn.Module,
        output_scale: float,
        source_positions: nn.Module | None = None,
    ):
        super().__init__()
        self.tokens, self.positions, self.layers = tokens, positions, layers
        self.source_positions = source_positions if source_positions is not None else positions
        self.output_scale = output_scale


def marian_parts(model: nn.Module) -> GraphParts:
    c = model.config
    embed = model.get_decoder().embed_tokens.weight
    tokens = TokenTable(
        embed, model.lm_head.weight, math.sqrt(c.d_model) if c.scale_embedding else 1.0, model.final_logits_bias
    )
    positions = TablePositions(model.get_decoder().embed_positions.weight)
    return GraphParts(tokens, positions, BartLayers(model, pre_norm=False), 1.0)


def m2m100_parts(model: nn.Module) -> GraphParts:
    c = model.config
    decoder = model.get_decoder()
    tokens = TokenTable(
        decoder.embed_tokens.weight, model.lm_head.weight, math.sqrt(c.d_model) if c.scale_embedding else 1.0, None
    )
    positions = M2M100Positions(decoder.embed_positions.weights, c.pad_token_id)
    return GraphParts(tokens, positions, BartLayers(model, pre_norm=True), 1.0)


def mbart_parts(model: nn.Module) -> GraphParts:
    c = model.config
    decoder = model.get_decoder()
    tokens = TokenTable(
        decoder.embed_tokens.weight,
        model.lm_head.weight,
        math.sqrt(c.d_model) if c.scale_embedding else 1.0,
        model.final_logits_bias,
    )
    learned = lambda side: TablePositions(side.embed_positions.weight, side.embed_positions.offset)
    layers = BartLayers(model, pre_norm=True)
    return GraphParts(tokens, learned(decoder), layers, 1.0, source_positions=learned(model.get_encoder()))


def t5_parts(model: nn.Module) -> GraphParts:
    c = model.config
    tokens = TokenTable(model.shared.weight, model.lm_head.weight, 1.0, None)
    scale = c.d_model**-0.5 if c.tie_word_embeddings else 1.0
    return GraphParts(tokens, None, T5Layers(model), scale)
