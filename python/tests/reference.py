"""An independent float64 reference of the MoE layer, written from the definitions (vLLM's
semantics for fused_experts / fused_moe, moefuse.h for the rest), for the binding's tests.

Plain loops over tokens and slots; every product and sum in float64."""

import math

import numpy as np

_erf = np.vectorize(math.erf)


def silu(v):
    return v / (1.0 + np.exp(-v))


def gelu_erf(v):
    return 0.5 * v * (1.0 + _erf(v / math.sqrt(2.0)))


def gelu_tanh(v):
    return 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def activate(name, gate, up, alpha=1.702, limit=None):
    """The GLU of one row: gate and up are float64 vectors (up None for relu2). limit: silu's
    clamp (DeepSeek-V4's swiglu_limit: gate <= limit, |up| <= limit; None: none), swigluoai's
    (7 when None)."""
    if name == "silu":
        if limit is not None:
            gate, up = np.minimum(gate, limit), np.clip(up, -limit, limit)
        return silu(gate) * up
    if name == "gelu":
        return gelu_erf(gate) * up
    if name == "gelu_tanh":
        return gelu_tanh(gate) * up
    if name == "relu":
        return np.maximum(gate, 0.0) * up
    if name == "relu2_no_mul":
        return np.maximum(gate, 0.0) ** 2
    if name == "swigluoai":
        limit = 7.0 if limit is None else limit
        g = np.minimum(gate, limit)
        u = np.clip(up, -limit, limit)
        return g * sigmoid(alpha * g) * (u + 1.0)
    raise ValueError(name)


def split_gate_up(h, activation, layout):
    """(gate, up) of the W1 output h [R13]: concat = first half gate; interleaved = even rows."""
    if activation == "relu2_no_mul":
        return h, None
    if layout == "interleaved":
        return h[0::2], h[1::2]
    half = h.shape[0] // 2
    return h[:half], h[half:]


def experts(x, w1, w2, topk_weights, topk_ids, activation="silu", weight_on_input=False, w1_bias=None,
            w2_bias=None, layout=None, alpha=1.702, limit=None):
    """vLLM fused_experts in float64: y[t] = sum_j w[t,j] * W2[e] act(W1[e] x[t] + b1) + b2; a slot
    with id -1 (no expert) adds nothing."""
    if layout is None:
        layout = "interleaved" if activation == "swigluoai" else "concat"
    x = np.asarray(x, np.float64)
    w1 = np.asarray(w1, np.float64)
    w2 = np.asarray(w2, np.float64)
    T, H = x.shape
    y = np.zeros((T, H))
    for t in range(T):
        for j in range(topk_ids.shape[1]):
            e = int(topk_ids[t, j])
            if e < 0:
                continue
            weight = float(topk_weights[t, j])
            xin = x[t] * weight if weight_on_input else x[t]
            h = w1[e] @ xin
            if w1_bias is not None:
                h = h + np.asarray(w1_bias[e], np.float64)
            gate, up = split_gate_up(h, activation, layout)
            out = w2[e] @ activate(activation, gate, up, alpha, limit)
            if w2_bias is not None:
                out = out + np.asarray(w2_bias[e], np.float64)
            y[t] += out if weight_on_input else weight * out
    return y


def scores_of(logits, score):
    logits = np.asarray(logits, np.float64)
    if score == "softmax":
        z = np.exp(logits - logits.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)
    if score == "sigmoid":
        return sigmoid(logits)
    if score == "sqrtsoftplus":
        return np.sqrt(np.log1p(np.exp(logits)))
    raise ValueError(score)


def _best(values, k):
    """Indices of the k largest values, ties to the lower index."""
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))
    return order[:k]


def route(logits, top_k, renormalize, score="softmax", correction_bias=None, n_group=0, topk_group=0,
          routed_scale=1.0):
    """(ids [T, k] int32, weights [T, k] float64), slots by descending selection score."""
    s = scores_of(logits, score)
    T, E = s.shape
    ids = np.zeros((T, top_k), np.int32)
    weights = np.zeros((T, top_k))
    for t in range(T):
        sel = s[t] + (np.asarray(correction_bias, np.float64) if correction_bias is not None else 0.0)
        eligible = np.ones(E, bool)
        if n_group > 1:
            size = E // n_group
            group_score = []
            for g in range(n_group):
                members = sorted(sel[g * size:(g + 1) * size], reverse=True)
                group_score.append(members[0] + members[1] if correction_bias is not None else members[0])
            eligible[:] = False
            for g in _best(group_score, topk_group):
                eligible[g * size:(g + 1) * size] = True
        masked = np.where(eligible, sel, -np.inf)
        chosen = _best(list(masked), top_k)
        ids[t] = chosen
        weights[t] = s[t, chosen]
        if renormalize:
            weights[t] /= weights[t].sum()
        weights[t] *= routed_scale
    return ids, weights


def rel_error(got, want):
    """Relative Frobenius error of got against the float64 reference."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    denom = np.linalg.norm(want)
    return np.linalg.norm(got - want) / (denom if denom > 0 else 1.0)


def experts_w8a8(x, w1, w2, topk_weights, topk_ids, quantize_act):
    """SwiGLU experts with the activations quantised as w8a8 does it: x once, then the whole
    intermediate A2 [T*k, I] (rows token*k + slot) before the down projection.
    quantize_act(m) returns the float64 matrix m after quantising and decoding it."""
    x = quantize_act(np.asarray(x, np.float64))
    w1 = np.asarray(w1, np.float64)
    w2 = np.asarray(w2, np.float64)
    T, k = topk_ids.shape
    inter = w2.shape[2]
    a2 = np.zeros((T * k, inter))
    for t in range(T):
        for j in range(k):
            gate, up = split_gate_up(w1[topk_ids[t, j]] @ x[t], "silu", "concat")
            a2[t * k + j] = activate("silu", gate, up)
    a2 = quantize_act(a2)
    y = np.zeros((T, x.shape[1]))
    for t in range(T):
        for j in range(k):
            y[t] += float(topk_weights[t, j]) * (w2[topk_ids[t, j]] @ a2[t * k + j])
    return y
