/*
 * reduce.c: the element-wise reduction kernels behind every collective.
 * One set of kernels per instruction set (AVX-512, AVX2 with F16C, SSE2,
 * plain C) is generated from the same macros, using GCC vector extensions
 * under target attributes, and the best set the CPU supports is chosen at
 * run time.  Every set gives the same bits, so the ranks of a job agree
 * whatever CPUs their nodes have.
 *
 * Numerics.  Integers wrap around (signed SUM and PROD run on the unsigned
 * kernels: two's complement makes the bits identical, without the UB).
 * Floating point is IEEE with round-to-nearest-even, and a NaN result is
 * always the canonical quiet NaN: the hardware would keep either operand's
 * payload, and compilers swap commutative operands, so payloads could
 * otherwise differ between kernel sets.  MIN and MAX give NaN if either
 * operand is NaN, else the first operand on ties (+0 and -0 are equal).
 * float16 and bfloat16 widen exactly to float32, combine there and round
 * once back (RNE); float32 has over twice their precision plus two bits,
 * so for +, * and / that double rounding equals the correctly rounded
 * result.  reduce_many rounds after every source, as a chain of
 * reduce_into calls would: the two give the same bits.
 */
#include <sys/types.h>

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "engine/engine.h"
#include "engine/reduce.h"

#define REDUCE_BLOCK	8192		/* dst bytes kept in L1 */
#define REDUCE_STREAM	(8u << 20)	/* bigger results: no cache */
#define NKOPS		7		/* per dtype: AVG uses SUM's */

/* The kernel of each op: AVG sums (and scales once at the end). */
static const uint8_t kernel_of[MCCL_NUM_OPS] = {
	[MCCL_SUM] = 0, [MCCL_PROD] = 1, [MCCL_MIN] = 2, [MCCL_MAX] = 3,
	[MCCL_AVG] = 0, [MCCL_BAND] = 4, [MCCL_BOR] = 5, [MCCL_BXOR] = 6,
};

typedef void (*kernel_fn)(void *, const void *, const void *, size_t);
typedef void (*scale_fn)(void *, size_t, uint32_t);

static const struct {
	const char	*name;
	size_t		 size;
	int		 isfloat;
} dtypes[MCCL_NUM_DTYPES] = {
	[MCCL_INT8] =		{ "int8", 1, 0 },
	[MCCL_UINT8] =		{ "uint8", 1, 0 },
	[MCCL_INT32] =		{ "int32", 4, 0 },
	[MCCL_UINT32] =		{ "uint32", 4, 0 },
	[MCCL_INT64] =		{ "int64", 8, 0 },
	[MCCL_UINT64] =		{ "uint64", 8, 0 },
	[MCCL_FLOAT16] =	{ "float16", 2, 1 },
	[MCCL_BFLOAT16] =	{ "bfloat16", 2, 1 },
	[MCCL_FLOAT32] =	{ "float32", 4, 1 },
	[MCCL_FLOAT64] =	{ "float64", 8, 1 },
};

static const char *const redops[MCCL_NUM_OPS] = {
	[MCCL_SUM] = "sum", [MCCL_PROD] = "prod", [MCCL_MIN] = "min",
	[MCCL_MAX] = "max", [MCCL_AVG] = "avg", [MCCL_BAND] = "band",
	[MCCL_BOR] = "bor", [MCCL_BXOR] = "bxor",
};

/* ---- scalar conversions of the 16-bit float formats ---- */

static float
bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint32_t
f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* m >> s rounded to nearest, ties to even; 1 <= s <= 31. */
static uint32_t
rne_shift(uint32_t m, unsigned int s)
{
	uint32_t q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);

	return q + (rem > half || (rem == half && (q & 1)));
}

/* float16 to float32, exact; a NaN is made quiet, as F16C does. */
static float
h2f(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = h >> 10 & 0x1f, man = h & 0x3ff;
	float f;

	if (exp == 0) {
		f = (float)man * 0x1p-24f;
		return sign ? -f : f;
	}
	if (exp == 0x1f)
		return bits_f32(sign | 0x7f800000 | man << 13 |
		    (man ? 0x400000 : 0));
	return bits_f32(sign | (exp + 112) << 23 | man << 13);
}

/* float32 to float16, round to nearest even; NaN keeps its top payload. */
static uint16_t
f2h(float f)
{
	uint32_t u = f32_bits(f), a = u & 0x7fffffff, e = a >> 23;
	uint32_t sign = u >> 16 & 0x8000;

	if (a > 0x7f800000)		/* NaN */
		return (uint16_t)(sign | 0x7e00 | (a >> 13 & 0x3ff));
	if (a >= 0x477ff000)		/* halfway above 65504, or more */
		return (uint16_t)(sign | 0x7c00);
	if (e >= 113)			/* normal: rebias by 112, round */
		return (uint16_t)(sign |
		    (a - 0x38000000 + 0xfff + (a >> 13 & 1)) >> 13);
	if (e < 102)			/* <= half the least subnormal */
		return (uint16_t)sign;
	return (uint16_t)(sign | rne_shift((a & 0x7fffff) | 0x800000,
	    126 - e));
}

static float
bf2f(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

/* float32 to bfloat16, round to nearest even; NaN keeps its top payload. */
static uint16_t
f2bf(float f)
{
	uint32_t u = f32_bits(f);

	if ((u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)(u >> 16 | 0x40);
	return (uint16_t)((u + 0x7fff + (u >> 16 & 1)) >> 16);
}

/* ---- element operations: S_ on scalars, V_ on GCC vectors ---- */

#define ID(x)		(x)

#define S_ADD(x, y)	((__typeof__(x))((x) + (y)))
#define S_MUL(x, y)	((__typeof__(x))((x) * (y)))
#define S_AND(x, y)	((__typeof__(x))((x) & (y)))
#define S_OR(x, y)	((__typeof__(x))((x) | (y)))
#define S_XOR(x, y)	((__typeof__(x))((x) ^ (y)))
#define S_MIN(x, y)	((y) < (x) ? (y) : (x))
#define S_MAX(x, y)	((x) < (y) ? (y) : (x))
#define S_NAN(x)	((__typeof__(x))NAN)
#define S_FIX(r)	((r) != (r) ? S_NAN(r) : (r))
#define S_ANYNAN(x, y)	((x) != (x) || (y) != (y))
#define S_FADD(x, y)	S_FIX((x) + (y))
#define S_FMUL(x, y)	S_FIX((x) * (y))
#define S_FDIV(x, y)	S_FIX((x) / (y))
#define S_FMIN(x, y)	(S_ANYNAN(x, y) ? S_NAN(x) : S_MIN(x, y))
#define S_FMAX(x, y)	(S_ANYNAN(x, y) ? S_NAN(x) : S_MAX(x, y))

/* m ? a : b lane by lane, m a comparison result (all ones or zero). */
#define V_SEL(m, a, b)	((__typeof__(a))(((m) & (__typeof__(m))(a)) | \
			    (~(m) & (__typeof__(m))(b))))
#define V_ADD(x, y)	((x) + (y))
#define V_MUL(x, y)	((x) * (y))
#define V_AND(x, y)	((x) & (y))
#define V_OR(x, y)	((x) | (y))
#define V_XOR(x, y)	((x) ^ (y))
#define V_MIN(x, y)	V_SEL((y) < (x), y, x)
#define V_MAX(x, y)	V_SEL((x) < (y), y, x)
#define V_NAN(x)	((__typeof__(x)){ 0 } + NAN)
#define V_FIX(r)	V_SEL((r) != (r), V_NAN(r), r)
#define V_ANYNAN(x, y)	(((x) != (x)) | ((y) != (y)))
#define V_FADD(x, y)	V_FIX((x) + (y))
#define V_FMUL(x, y)	V_FIX((x) * (y))
#define V_FDIV(x, y)	V_FIX((x) / (y))
#define V_FMIN(x, y)	V_SEL(V_ANYNAN(x, y), V_NAN(x), V_MIN(x, y))
#define V_FMAX(x, y)	V_SEL(V_ANYNAN(x, y), V_NAN(x), V_MAX(x, y))

/* ---- kernel generators ---- */

/*
 * One step on a piece of type PT at byte offset i_: load (any alignment),
 * widen W, combine with OP, narrow N, store.  A piece is a whole vector in
 * the main loop and one element in the tail.
 */
#define STEP2(PT, W, N, OP) do {					\
	PT pa_, pb_;							\
	memcpy(&pa_, x_ + i_, sizeof(PT));				\
	memcpy(&pb_, y_ + i_, sizeof(PT));				\
	__typeof__(W(pa_)) wa_ = W(pa_), wb_ = W(pb_);			\
	pa_ = N(OP(wa_, wb_));						\
	memcpy(o_ + i_, &pa_, sizeof(PT));				\
} while (0)

#define STEP1(PT, W, N, OP) do {					\
	PT pa_;								\
	memcpy(&pa_, p_ + i_, sizeof(PT));				\
	__typeof__(W(pa_)) wa_ = W(pa_);				\
	pa_ = N(OP(wa_, d_));						\
	memcpy(p_ + i_, &pa_, sizeof(PT));				\
} while (0)

/* out[i] = a[i] op b[i]; out may be a, but may not overlap b otherwise. */
#define KERNEL(fn, attr, T, VT, WV, NV, VOP, WS, NS, SOP)		\
static attr void							\
fn(void *out, const void *a, const void *b, size_t n)			\
{									\
	unsigned char *o_ = out;					\
	const unsigned char *x_ = a, *y_ = b;				\
	size_t i_ = 0, end_ = n * sizeof(T);				\
									\
	for (; end_ - i_ >= sizeof(VT); i_ += sizeof(VT))		\
		STEP2(VT, WV, NV, VOP);					\
	for (; i_ < end_; i_ += sizeof(T))				\
		STEP2(T, WS, NS, SOP);					\
}

/* buf[i] = buf[i] / nranks, in D (float32, or float64 for float64). */
#define SCALE(fn, attr, T, VT, WV, NV, WS, NS, o, D)			\
static attr void							\
fn(void *buf, size_t n, uint32_t nranks)				\
{									\
	unsigned char *p_ = buf;					\
	size_t i_ = 0, end_ = n * sizeof(T);				\
	const D d_ = (D)nranks;						\
									\
	for (; end_ - i_ >= sizeof(VT); i_ += sizeof(VT))		\
		STEP1(VT, WV, NV, o##_FDIV);				\
	for (; i_ < end_; i_ += sizeof(T))				\
		STEP1(T, WS, NS, S_FDIV);				\
}

/* Kernel families of set p: attr its target, o its ops (V_ or S_). */
#define MINMAX_KERNELS(p, attr, o, s, T)				\
	KERNEL(p##_##s##_min, attr, T, p##_##s, ID, ID, o##_MIN,	\
	    ID, ID, S_MIN)						\
	KERNEL(p##_##s##_max, attr, T, p##_##s, ID, ID, o##_MAX,	\
	    ID, ID, S_MAX)

#define INT_KERNELS(p, attr, o, s, T)					\
	KERNEL(p##_##s##_sum, attr, T, p##_##s, ID, ID, o##_ADD,	\
	    ID, ID, S_ADD)						\
	KERNEL(p##_##s##_prod, attr, T, p##_##s, ID, ID, o##_MUL,	\
	    ID, ID, S_MUL)						\
	KERNEL(p##_##s##_band, attr, T, p##_##s, ID, ID, o##_AND,	\
	    ID, ID, S_AND)						\
	KERNEL(p##_##s##_bor, attr, T, p##_##s, ID, ID, o##_OR,	\
	    ID, ID, S_OR)						\
	KERNEL(p##_##s##_bxor, attr, T, p##_##s, ID, ID, o##_XOR,	\
	    ID, ID, S_XOR)						\
	MINMAX_KERNELS(p, attr, o, s, T)

#define FLOAT_KERNELS(p, attr, o, s, T, VT, WV, NV, WS, NS, D)		\
	KERNEL(p##_##s##_sum, attr, T, VT, WV, NV, o##_FADD,		\
	    WS, NS, S_FADD)						\
	KERNEL(p##_##s##_prod, attr, T, VT, WV, NV, o##_FMUL,		\
	    WS, NS, S_FMUL)						\
	KERNEL(p##_##s##_min, attr, T, VT, WV, NV, o##_FMIN,		\
	    WS, NS, S_FMIN)						\
	KERNEL(p##_##s##_max, attr, T, VT, WV, NV, o##_FMAX,		\
	    WS, NS, S_FMAX)						\
	SCALE(p##_##s##_scale, attr, T, VT, WV, NV, WS, NS, o, D)

/*
 * A narrowed wire (wire_*): float32 carried as a 16-bit float w (h, or
 * bf).  narrow: out16[i] = w(a[i]); widen: out[i] = a16[i] as float32;
 * add_narrow: out[i] = a[i] + b16[i] in float32, and o16[i] = w(out[i])
 * (with round, out[i] = o16[i] as float32).
 */
#define WIRE_KERNELS(p, attr, w)					\
static attr void							\
p##_##w##_narrow_n(void *out, const float *a, size_t n)			\
{									\
	unsigned char *o_ = out;					\
	size_t i = 0, lanes = sizeof(p##_f32) / 4;			\
									\
	for (; n - i >= lanes; i += lanes) {				\
		p##_f32 v;						\
		p##_h16 h;						\
									\
		memcpy(&v, a + i, sizeof(v));				\
		h = p##_##w##_narrow(v);				\
		memcpy(o_ + 2 * i, &h, sizeof(h));			\
	}								\
	for (; i < n; i++) {						\
		uint16_t h = scalar_##w##_narrow(a[i]);			\
									\
		memcpy(o_ + 2 * i, &h, 2);				\
	}								\
}									\
static attr void							\
p##_##w##_widen_n(float *out, const void *a, size_t n)			\
{									\
	const unsigned char *a_ = a;					\
	size_t i = 0, lanes = sizeof(p##_f32) / 4;			\
									\
	for (; n - i >= lanes; i += lanes) {				\
		p##_h16 h;						\
		p##_f32 v;						\
									\
		memcpy(&h, a_ + 2 * i, sizeof(h));			\
		v = p##_##w##_widen(h);					\
		memcpy(out + i, &v, sizeof(v));				\
	}								\
	for (; i < n; i++) {						\
		uint16_t h;						\
									\
		memcpy(&h, a_ + 2 * i, 2);				\
		out[i] = scalar_##w##_widen(h);				\
	}								\
}									\
static attr void							\
p##_##w##_add_narrow_n(float *out, const float *a, const void *b,	\
    void *o16, size_t n, int round)					\
{									\
	const unsigned char *b_ = b;					\
	unsigned char *o_ = o16;					\
	size_t i = 0, lanes = sizeof(p##_f32) / 4;			\
									\
	for (; n - i >= lanes; i += lanes) {				\
		p##_h16 h;						\
		p##_f32 v;						\
									\
		memcpy(&h, b_ + 2 * i, sizeof(h));			\
		memcpy(&v, a + i, sizeof(v));				\
		v = v + p##_##w##_widen(h);				\
		h = p##_##w##_narrow(v);				\
		if (round)						\
			v = p##_##w##_widen(h);				\
		memcpy(out + i, &v, sizeof(v));				\
		memcpy(o_ + 2 * i, &h, sizeof(h));			\
	}								\
	for (; i < n; i++) {						\
		uint16_t h;						\
		float v;						\
									\
		memcpy(&h, b_ + 2 * i, 2);				\
		v = a[i] + scalar_##w##_widen(h);			\
		h = scalar_##w##_narrow(v);				\
		out[i] = round ? scalar_##w##_widen(h) : v;		\
		memcpy(o_ + 2 * i, &h, 2);				\
	}								\
}

/* Set p needs the types p_u8 .. p_f64, p_h16 and p_h_ / p_bf_ widen and
 * narrow between p_h16 and p_f32. */
#define ISA_KERNELS(p, attr, o)						\
	INT_KERNELS(p, attr, o, u8, uint8_t)				\
	INT_KERNELS(p, attr, o, u32, uint32_t)				\
	INT_KERNELS(p, attr, o, u64, uint64_t)				\
	MINMAX_KERNELS(p, attr, o, i8, int8_t)				\
	MINMAX_KERNELS(p, attr, o, i32, int32_t)			\
	MINMAX_KERNELS(p, attr, o, i64, int64_t)			\
	FLOAT_KERNELS(p, attr, o, f32, float, p##_f32, ID, ID, ID, ID,	\
	    float)							\
	FLOAT_KERNELS(p, attr, o, f64, double, p##_f64, ID, ID, ID, ID,	\
	    double)							\
	FLOAT_KERNELS(p, attr, o, f16, uint16_t, p##_h16, p##_h_widen,	\
	    p##_h_narrow, h2f, f2h, float)				\
	FLOAT_KERNELS(p, attr, o, bf16, uint16_t, p##_h16, p##_bf_widen, \
	    p##_bf_narrow, bf2f, f2bf, float)				\
	WIRE_KERNELS(p, attr, h)					\
	WIRE_KERNELS(p, attr, bf)

/* Vector types of VB bytes; p_h16 holds as many lanes as p_f32. */
#define VEC_TYPES(p, VB)						\
typedef uint8_t  p##_u8  __attribute__((vector_size(VB)));		\
typedef int8_t   p##_i8  __attribute__((vector_size(VB)));		\
typedef uint32_t p##_u32 __attribute__((vector_size(VB)));		\
typedef int32_t  p##_i32 __attribute__((vector_size(VB)));		\
typedef uint64_t p##_u64 __attribute__((vector_size(VB)));		\
typedef int64_t  p##_i64 __attribute__((vector_size(VB)));		\
typedef float    p##_f32 __attribute__((vector_size(VB)));		\
typedef double   p##_f64 __attribute__((vector_size(VB)));		\
typedef uint16_t p##_h16 __attribute__((vector_size(VB / 2)));

/* bfloat16 is the top half of a float32: widening is a shift, narrowing
 * the same as f2bf (a NaN, any payload, stays a quiet NaN). */
#define BF16_VEC(p, attr)						\
static inline attr p##_f32						\
p##_bf_widen(p##_h16 h)							\
{									\
	return (p##_f32)(__builtin_convertvector(h, p##_u32) << 16);	\
}									\
static inline attr p##_h16						\
p##_bf_narrow(p##_f32 f)						\
{									\
	p##_u32 u = (p##_u32)f;						\
	p##_u32 nan = (p##_u32)((u & 0x7fffffff) > 0x7f800000);		\
	p##_u32 r = (u + 0x7fff + (u >> 16 & 1)) >> 16;			\
									\
	r = (r & ~nan) | ((u >> 16 | 0x40) & nan);			\
	return __builtin_convertvector(r, p##_h16);			\
}

/* ---- the kernel sets ---- */

typedef uint8_t		scalar_u8;
typedef int8_t		scalar_i8;
typedef uint32_t	scalar_u32;
typedef int32_t		scalar_i32;
typedef uint64_t	scalar_u64;
typedef int64_t		scalar_i64;
typedef float		scalar_f32;
typedef double		scalar_f64;
typedef uint16_t	scalar_h16;
#define scalar_h_widen		h2f
#define scalar_h_narrow		f2h
#define scalar_bf_widen		bf2f
#define scalar_bf_narrow	f2bf

ISA_KERNELS(scalar, , S)

#if defined(__x86_64__)

#define ATTR_AVX512	__attribute__((target( \
			    "avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")))
#define ATTR_AVX2	__attribute__((target("avx2,f16c")))
#define F16C_RNE	(_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

VEC_TYPES(avx512, 64)
VEC_TYPES(avx2, 32)
VEC_TYPES(sse2, 16)
BF16_VEC(avx512, ATTR_AVX512)
BF16_VEC(avx2, ATTR_AVX2)
BF16_VEC(sse2, )

static inline ATTR_AVX512 avx512_f32
avx512_h_widen(avx512_h16 h)
{
	return (avx512_f32)_mm512_cvtph_ps((__m256i)h);
}

static inline ATTR_AVX512 avx512_h16
avx512_h_narrow(avx512_f32 f)
{
	return (avx512_h16)_mm512_cvtps_ph((__m512)f, F16C_RNE);
}

static inline ATTR_AVX2 avx2_f32
avx2_h_widen(avx2_h16 h)
{
	return (avx2_f32)_mm256_cvtph_ps((__m128i)h);
}

static inline ATTR_AVX2 avx2_h16
avx2_h_narrow(avx2_f32 f)
{
	return (avx2_h16)_mm256_cvtps_ph((__m256)f, F16C_RNE);
}

/* SSE2 alone has no float16 conversion: convert lane by lane. */
static inline sse2_f32
sse2_h_widen(sse2_h16 h)
{
	sse2_f32 f;

	for (int k = 0; k < 4; k++)
		f[k] = h2f(h[k]);
	return f;
}

static inline sse2_h16
sse2_h_narrow(sse2_f32 f)
{
	sse2_h16 h;

	for (int k = 0; k < 4; k++)
		h[k] = f2h(f[k]);
	return h;
}

ISA_KERNELS(avx512, ATTR_AVX512, V)
ISA_KERNELS(avx2, ATTR_AVX2, V)
ISA_KERNELS(sse2, , V)

/* AVX2 and F16C, with the OS saving the AVX state (libgcc checks that);
 * F16C from CPUID itself, as not every compiler's builtin knows it. */
static int
isa_avx2_usable(void)
{
	unsigned int a, b, c, d;

	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") &&
	    __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

static int
isa_avx512_usable(void)
{
	return isa_avx2_usable() && __builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") &&
	    __builtin_cpu_supports("avx512dq");
}

#endif /* __x86_64__ */

static int
isa_always(void)
{
	return 1;
}

typedef void (*narrow_fn)(void *, const float *, size_t);
typedef void (*widen_fn)(float *, const void *, size_t);
typedef void (*add_narrow_fn)(float *, const float *, const void *, void *,
    size_t, int);

enum { WIRE_H, WIRE_BF, NWIRES };	/* float16, bfloat16 */

struct isa {
	const char	*name;
	int		(*usable)(void);
	kernel_fn	 kernels[MCCL_NUM_DTYPES][NKOPS];
	scale_fn	 scale[MCCL_NUM_DTYPES];	/* float types */
	narrow_fn	 narrow[NWIRES];
	widen_fn	 widen[NWIRES];
	add_narrow_fn	 add_narrow[NWIRES];
};

/* A row of kernels: signed types share SUM, PROD and the bitwise ops
 * with unsigned ones; floating-point types have no bitwise ops. */
#define ROW(p, u, s)	{ p##_##u##_sum, p##_##u##_prod, p##_##s##_min, \
			    p##_##s##_max, p##_##u##_band, p##_##u##_bor, \
			    p##_##u##_bxor }
#define FROW(p, f)	{ p##_##f##_sum, p##_##f##_prod, p##_##f##_min, \
			    p##_##f##_max, NULL, NULL, NULL }
#define ISA_ENTRY(p, usable) {						\
	#p, usable, {							\
		[MCCL_INT8] = ROW(p, u8, i8),				\
		[MCCL_UINT8] = ROW(p, u8, u8),				\
		[MCCL_INT32] = ROW(p, u32, i32),			\
		[MCCL_UINT32] = ROW(p, u32, u32),			\
		[MCCL_INT64] = ROW(p, u64, i64),			\
		[MCCL_UINT64] = ROW(p, u64, u64),			\
		[MCCL_FLOAT16] = FROW(p, f16),				\
		[MCCL_BFLOAT16] = FROW(p, bf16),			\
		[MCCL_FLOAT32] = FROW(p, f32),				\
		[MCCL_FLOAT64] = FROW(p, f64),				\
	}, {								\
		[MCCL_FLOAT16] = p##_f16_scale,				\
		[MCCL_BFLOAT16] = p##_bf16_scale,			\
		[MCCL_FLOAT32] = p##_f32_scale,				\
		[MCCL_FLOAT64] = p##_f64_scale,				\
	},								\
	{ p##_h_narrow_n, p##_bf_narrow_n },				\
	{ p##_h_widen_n, p##_bf_widen_n },				\
	{ p##_h_add_narrow_n, p##_bf_add_narrow_n },			\
}

/* In order of preference; the last is always usable. */
static const struct isa isas[] = {
#if defined(__x86_64__)
	ISA_ENTRY(avx512, isa_avx512_usable),
	ISA_ENTRY(avx2, isa_avx2_usable),
	ISA_ENTRY(sse2, isa_always),
#endif
	ISA_ENTRY(scalar, isa_always),
};

#define NISAS	(sizeof(isas) / sizeof(isas[0]))

/* NULL until the first use; threads racing there store the same value. */
static _Atomic(const struct isa *) isa_active;

static const struct isa *
isa_get(void)
{
	const struct isa *isa;
	size_t i;

	isa = atomic_load_explicit(&isa_active, memory_order_acquire);
	if (isa != NULL)
		return isa;
	for (i = 0; !isas[i].usable(); i++)	/* the last one always is */
		;
	atomic_store_explicit(&isa_active, &isas[i], memory_order_release);
	return &isas[i];
}

/* ---- interface ---- */

size_t
dtype_size(int dtype)
{
	if (dtype < 0 || dtype >= MCCL_NUM_DTYPES)
		return 0;
	return dtypes[dtype].size;
}

const char *
dtype_name(int dtype)
{
	if (dtype < 0 || dtype >= MCCL_NUM_DTYPES)
		return "unknown";
	return dtypes[dtype].name;
}

const char *
redop_name(int op)
{
	if (op < 0 || op >= MCCL_NUM_OPS)
		return "unknown";
	return redops[op];
}

int
reduce_supported(int dtype, int op)
{
	if (dtype < 0 || dtype >= MCCL_NUM_DTYPES || op < 0 ||
	    op >= MCCL_NUM_OPS)
		return 0;
	if (op == MCCL_AVG)
		return dtypes[dtype].isfloat;
	return !dtypes[dtype].isfloat || kernel_of[op] < 4;
}

const char *
reduce_isa(void)
{
	return isa_get()->name;
}

/* For tests and benchmarks: use kernel set name (NULL: the best one). */
int
reduce_force_isa(const char *name)
{
	size_t i;

	if (name == NULL) {
		atomic_store_explicit(&isa_active, NULL, memory_order_release);
		return 0;
	}
	for (i = 0; i < NISAS; i++) {
		if (strcmp(isas[i].name, name) == 0 && isas[i].usable()) {
			atomic_store_explicit(&isa_active, &isas[i],
			    memory_order_release);
			return 0;
		}
	}
	return -1;
}

/* Callers check reduce_supported() first: anything else is a daemon bug. */
static kernel_fn
reduce_kernel(int dtype, int op)
{
	if (!reduce_supported(dtype, op))
		fatalx("reduce: unsupported dtype %d (%s) with op %d (%s)",
		    dtype, dtype_name(dtype), op, redop_name(op));
	return isa_get()->kernels[dtype][kernel_of[op]];
}

void
reduce_into(void *dst, const void *src, size_t count, int dtype, int op)
{
	reduce_kernel(dtype, op)(dst, dst, src, count);
}

/* out = srcs[0] op srcs[1] op ... for the n elements at byte offset at. */
static void
reduce_block(kernel_fn k, unsigned char *out, const void *const *srcs,
    size_t nsrcs, size_t at, size_t n)
{
	k(out, (const unsigned char *)srcs[0] + at,
	    (const unsigned char *)srcs[1] + at, n);
	for (size_t s = 2; s < nsrcs; s++)
		k(out, out, (const unsigned char *)srcs[s] + at, n);
}

#if defined(__x86_64__)
/*
 * A result too large to stay in cache, out of place: reduce each block in
 * an L1 buffer and stream it to dst with non-temporal stores, which spares
 * reading every line of dst for ownership (a third of the traffic of a
 * two-source reduction).  Smaller results stay in cache for the next step.
 */
static int
reduce_streamed(kernel_fn k, unsigned char *d, const void *const *srcs,
    size_t nsrcs, size_t count, size_t esz)
{
	_Alignas(64) unsigned char tmp[REDUCE_BLOCK];
	size_t head, off, n, i, blk = REDUCE_BLOCK / esz;

	if (count * esz < REDUCE_STREAM || d == srcs[0] ||
	    (uintptr_t)d % esz != 0)
		return 0;
	head = (64 - (uintptr_t)d % 64) % 64 / esz;	/* up to a line */
	reduce_block(k, d, srcs, nsrcs, 0, head);
	for (off = head; off < count; off += n) {
		n = count - off < blk ? count - off : blk;
		reduce_block(k, tmp, srcs, nsrcs, off * esz, n);
		for (i = 0; i + 16 <= n * esz; i += 16)
			_mm_stream_si128((__m128i *)(d + off * esz + i),
			    _mm_load_si128((const __m128i *)(tmp + i)));
		memcpy(d + off * esz + i, tmp + i, n * esz - i);
	}
	_mm_sfence();	/* order the streamed stores for other threads */
	return 1;
}
#endif

/*
 * One pass over memory: block by block, the first two sources go into dst
 * and each further source is folded into that block while it is in L1.
 */
void
reduce_many(void *dst, const void *const *srcs, size_t nsrcs, size_t count,
    int dtype, int op)
{
	kernel_fn k = reduce_kernel(dtype, op);
	size_t esz = dtype_size(dtype), blk = REDUCE_BLOCK / esz, off, n;
	unsigned char *d = dst;

	if (nsrcs == 0)
		return;
	if (nsrcs == 1) {
		if (dst != srcs[0] && count > 0)
			memcpy(dst, srcs[0], count * esz);
		return;
	}
#if defined(__x86_64__)
	if (reduce_streamed(k, d, srcs, nsrcs, count, esz))
		return;
#endif
	for (off = 0; off < count; off += n) {
		n = count - off < blk ? count - off : blk;
		reduce_block(k, d + off * esz, srcs, nsrcs, off * esz, n);
	}
}

/* Write a block from L1 out to d, past the cache when stream is set. */
static void
block_out(unsigned char *d, const unsigned char *blk, size_t n, int stream)
{
#if defined(__x86_64__)
	size_t head = (16 - (uintptr_t)d % 16) % 16, i;

	if (stream) {
		head = head < n ? head : n;
		memcpy(d, blk, head);
		for (i = head; i + 16 <= n; i += 16)
			_mm_stream_si128((__m128i *)(void *)(d + i),
			    _mm_loadu_si128((const __m128i *)(const void *)
			    (blk + i)));
		memcpy(d + i, blk + i, n - i);
		return;
	}
#endif
	(void)stream;
	memcpy(d, blk, n);
}

/* A destination that is a source: its block was just read, so in cache. */
static int
is_src(const void *d, const void *const *srcs, size_t nsrcs)
{
	for (size_t s = 0; s < nsrcs; s++)
		if (srcs[s] == d)
			return 1;
	return 0;
}

/*
 * Every dsts[i] = srcs[0] op ... op srcs[nsrcs - 1], divided by avg_div
 * when it is not 0 (MCCL_AVG): a node's local ranks all taking the result.
 * Block by block through an L1 buffer, so each source is read once and
 * each destination written once (with streaming stores when the result
 * would not stay in cache and the destination is not a source, whose lines
 * the block just brought in) instead of a reduction into one buffer and
 * copies out of it.  A dst may be one of the srcs (in place): a block is
 * read from every source before it is written anywhere.
 */
void
reduce_fan(void *const *dsts, size_t ndsts, const void *const *srcs,
    size_t nsrcs, size_t count, int dtype, int op, uint32_t avg_div)
{
	_Alignas(64) unsigned char tmp[REDUCE_BLOCK];
	kernel_fn k = reduce_kernel(dtype, op);
	size_t esz = dtype_size(dtype), blk = REDUCE_BLOCK / esz, off, n;
	int stream = count * esz >= REDUCE_STREAM;

	if (nsrcs == 0 || count == 0)
		return;
	for (off = 0; off < count; off += n) {
		n = count - off < blk ? count - off : blk;
		if (nsrcs == 1)
			memcpy(tmp, (const unsigned char *)srcs[0] + off * esz,
			    n * esz);
		else
			reduce_block(k, tmp, srcs, nsrcs, off * esz, n);
		if (avg_div > 1)
			isa_get()->scale[dtype](tmp, n, avg_div);
		for (size_t i = 0; i < ndsts; i++)
			block_out((unsigned char *)dsts[i] + off * esz, tmp,
			    n * esz, stream && !is_src(dsts[i], srcs, nsrcs));
	}
#if defined(__x86_64__)
	if (stream)
		_mm_sfence();	/* order the streamed stores for other threads */
#endif
}

/* nranks 0 or 1 leaves buf as it is. */
void
reduce_scale_avg(void *buf, size_t count, int dtype, uint32_t nranks)
{
	if (!reduce_supported(dtype, MCCL_AVG))
		fatalx("reduce: no average of dtype %d (%s)", dtype,
		    dtype_name(dtype));
	if (nranks > 1)
		isa_get()->scale[dtype](buf, count, nranks);
}

/* ---- a narrowed wire: float32 sent as float16 or bfloat16 ---- */

/* The kernels' index of wire (MCCL_FLOAT16 or MCCL_BFLOAT16). */
static int
wire_index(int wire)
{
	if (wire == MCCL_FLOAT16)
		return WIRE_H;
	if (wire == MCCL_BFLOAT16)
		return WIRE_BF;
	fatalx("reduce: no wire format %d (%s)", wire, dtype_name(wire));
}

/* dst (count 16-bit floats) = src rounded to nearest even; inf and NaN kept. */
void
wire_narrow(void *dst, const float *src, size_t count, int wire)
{
	isa_get()->narrow[wire_index(wire)](dst, src, count);
}

/* dst = src (count 16-bit floats), exactly, as float32. */
void
wire_widen(float *dst, const void *src, size_t count, int wire)
{
	isa_get()->widen[wire_index(wire)](dst, src, count);
}

/*
 * One pass for a ring step: dst = own + src widened (in float32), and
 * out (16-bit) = dst narrowed, what leaves next; with round, dst takes the
 * narrowed value too (the block every node must end with alike).
 */
void
wire_add_narrow(float *dst, const float *own, const void *src, void *out,
    size_t count, int wire, int round)
{
	isa_get()->add_narrow[wire_index(wire)](dst, own, src, out, count,
	    round);
}
