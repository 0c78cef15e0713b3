// training/optim.h: nanoGPT's learning-rate schedule, gradient clipping and PyTorch's AdamW.
// It touches parameters, gradients and moments as flat arrays, nothing else.
#ifndef ATTN_TRAINING_OPTIM_H
#define ATTN_TRAINING_OPTIM_H

#include <math.h>
#include "options.h"
#include "params.h"

// Optimiser: nanoGPT's schedule and PyTorch's AdamW.

static float get_lr(const Opts *o, int it) {
    if (it < o->warmup_iters) return o->lr * (it + 1) / (o->warmup_iters + 1);
    if (it > o->lr_decay_iters || o->lr_decay_iters <= o->warmup_iters) return o->min_lr;
    double ratio = (double)(it - o->warmup_iters) / (o->lr_decay_iters - o->warmup_iters);
    double coeff = 0.5 * (1.0 + cos(M_PI * ratio));
    return (float)(o->min_lr + coeff * (o->lr - o->min_lr));
}

// PyTorch's AdamW step on the shard [lo, hi) of the parameter block p, in one parallel region;
// g, m and v hold that shard only (a rank's, dist.h; the whole block alone), and gscale is the
// clipping factor. The gradients are zeroed on the way, ready for the next step's accumulation.
static void adamw_step(float *p, float *g, float *m, float *v, size_t lo, size_t hi, const ParamTensor *pt, int npt,
                       float lr, float weight_decay, float b1, float b2, int t, float gscale) {
    float bc1 = 1.0f - powf(b1, (float)t), bc2_sqrt = sqrtf(1.0f - powf(b2, (float)t));
#pragma omp parallel
    for (int k = 0; k < npt; k++) {
        float decay = 1.0f - lr * (pt[k].decay ? weight_decay : 0.0f);
        size_t from = pt[k].off > lo ? pt[k].off : lo, to = pt[k].off + pt[k].n < hi ? pt[k].off + pt[k].n : hi;
        if (from >= to) continue;
        float *pk = p + from, *gk = g + (from - lo), *mk = m + (from - lo), *vk = v + (from - lo);
#pragma omp for simd schedule(static) nowait
        for (size_t i = 0; i < to - from; i++) {
            float gi = gk[i] * gscale;
            gk[i] = 0.0f;
            mk[i] += (1.0f - b1) * (gi - mk[i]);
            vk[i] = b2 * vk[i] + (1.0f - b2) * gi * gi;
            pk[i] = pk[i] * decay - (lr / bc1) * mk[i] / (sqrtf(vk[i]) / bc2_sqrt + 1e-8f);
        }
    }
}

// The factor that clips the gradients' global norm, sqrt(grad_sq), to max_norm (0: no clipping).
static float clip_scale(double grad_sq, float max_norm) {
    double norm = sqrt(grad_sq);
    return max_norm > 0.0f && norm > max_norm ? (float)(max_norm / (norm + 1e-6)) : 1.0f;
}

#endif
