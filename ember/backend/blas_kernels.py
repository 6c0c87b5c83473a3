"""What NumPy's OpenBLAS kernels were measured to keep, per kernel (``openblas_get_corename``):
the inner dimensions for which its threads give its one-thread sums, the row grain at
which row blocks of a product give the whole product's bits, and which other layouts of
a product keep ``np.matmul``'s bits. Pure data: :mod:`ember.backend.threads` reads it for
the kernel NumPy's BLAS runs. A kernel not listed gets 0 / no: measured or nothing.
"""

# OpenBLAS's threaded products group an inner dimension longer than its kernel's K block
# (GEMM_Q) otherwise than its one-thread products do, so their last bits differ from
# there on (this OpenBLAS on SkylakeX kernels: from k = 449 in float32; the same for its
# matrix-vector products, a bias gradient's ``ones @ g`` included; tests/
# test_threads_inner_dim.py pins the edge). Up to the block its float32 threads split
# only rows and columns and every element is the same sum (781 shapes checked). Its
# float64 threads differ even for short inner dimensions (400 x 32 by 32 x 300), so
# float64 products never take them. On its Haswell kernels (which it runs on AMD's Zen
# cores too) the threads of both dtypes keep the bits only for an inner dimension of at
# most 7 (321 shapes of 1-4099 rows and 1-2049 columns per dtype, each also transposed,
# all equal at k = 1-7); from k = 8, where the kernel's unrolled inner loop starts, they
# differ (float32 400 x 8 by 8 x 300, float64 257 x 8 by 8 x 300; measured by
# benchmarks/blas_threads_bound.py). So BLAS's own threads take a product only up to
# the bound measured for the kernel the library reports (keyed by OpenBLAS's core name);
# on a kernel not measured here, none.
SAME_BITS_K = {"skylakex": {"f": 448, "d": 0}, "haswell": {"f": 7, "d": 7}}


# Row blocks of a product give the whole product's bits on the kernels listed here when
# each block starts at a multiple of the kernel's grain of rows and has at least a grain
# of rows (fewer, or a single column, and NumPy or BLAS take a matrix-vector path). The
# grain is the kernel's tile of the result's rows: OpenBLAS computes ``C^T = B^T A^T``,
# so a row-major result's rows are its ``N`` dimension, and the rows of the last partial
# tile are summed by another micro-kernel than a whole tile's. Haswell (which OpenBLAS
# also runs on AMD's Zen cores): float32 in multiples of 12 rows, float64 of 2; 2,520
# products each (10 row counts of 24-1031, inner 1-1025, 2-1025 columns, four layouts,
# two and three blocks) equal, where edges at multiples of 6 differ in 1,680 of them
# (measured by benchmarks/row_block_grain.py; pinned by tests/test_threads_row_grain.py).
# SkylakeX (OpenBLAS 0.3.31, NumPy 2.4's): float32 blocks of two rows or more, at any
# row, as long as each block runs on the same kernel as the whole product (see
# SMALL_KERNEL_MNK); its float64 blocks differ. On a kernel not measured, 0: products are
# not split in row blocks.
ROW_GRAIN = {"haswell": {"f": 12, "d": 2}, "skylakex": {"f": 2}}


# Column blocks of a product (``a @ b[:, lo:hi]`` into the same columns of the result)
# give the whole product's bits on the kernels listed here, each block starting at a
# multiple of the grain of columns, as long as each block runs on the same kernel as the
# whole product (see SMALL_KERNEL_MNK). SkylakeX float32 (OpenBLAS 0.3.31): 1,696
# products of 16-256 rows, inner 7-1025, 64-1031 columns, four layouts, cut at a half
# and a third, every block past the small kernel's bound: none differ, at any column
# and at multiples of 16 (the kernel's tile of the result's columns, OpenBLAS's ``M``;
# the grain kept here). Not measured elsewhere: products are not split in columns.
# Column blocks of a product with few rows pack half of the other operand each instead
# of all of it (``thread_products._split_direction``).
COLUMN_GRAIN = {"skylakex": {"f": 16}}


# OpenBLAS's small-matrix kernels (built for SkylakeX since 0.3.16) take a product of at
# most 100^3 multiply-adds (``m*n*k``; with a transposed operand, fewer shapes) and sum
# its elements in another order than the blocked kernel past it. So a row block under
# that size of a product over it gives other bits (100 x 300 by 300 x 70 in blocks of 34
# and 66 rows: 180 of 7,000 elements); blocks and whole on the blocked kernel give the
# same bits at any row (2,032 products of 48-2048 rows, inner 7-1025, 32-1025 columns,
# four layouts, blocks of 1 row and more, every block over the bound: none differ), and
# blocks and whole on the small kernel with neither operand transposed too (126 shapes
# of 16-100 rows, blocks of 2 rows and more). Row blocks on the kernels listed here are
# taken only under those conditions (``threads.row_blocks_keep_kernel``).
SMALL_KERNEL_MNK = {"skylakex": {"f": 100 ** 3}}


# A float32 product computed through another layout of its operands gives ``np.matmul``'s
# bits on the kernels listed here: the transposed product ``(b.T @ a.T).T`` and 128-row
# blocks of a narrow product (``gemm._by_transpose``, ``gemm._narrow_by_rows``; SkylakeX:
# every shape of their ranges, tests/test_mkl_gemm.py). On OpenBLAS's Haswell kernels
# (AMD's Zen cores run them too) ``(b.T @ a.T).T`` differs from ``a @ b`` in 36 of 45
# shapes of ``_by_transpose``'s range, and the narrow head's blocks differ as well (both
# ways are also slower there: 32x128x128 17.3 against 16.4 us, 1024x128x10 73.9 against
# 56.1), so there, and on a kernel not measured, those products run as ``np.matmul``
# itself (eager ember, compiled plans and a recurrent cell's loop alike).
LAYOUTS_KEEP_BITS = frozenset({"skylakex"})
# ``x @ w.T`` on a row-major copy of ``w.T`` gives the product on the transposed weight's
# bits for float32 with 19-32 rows, k up to 256 and n a multiple of 64 up to 512 on the
# kernels listed here (``matmul_graph._kept_product``, ``_copy_keeps_bits``; SkylakeX:
# tests/test_rnn_step_paths.py; Haswell: all 57,344 draws of m = 19-32, k = 1-256,
# n = 64-512 in steps of 64 equal to ``np.matmul(x, w.T)``, and 32x64x128 8.5 against
# 9.2 us).
COPY_KEEPS_BITS = frozenset({"skylakex", "haswell"})


# MKL (``ember[mkl]``), keyed by the code branch it dispatches to on this CPU
# (``mkl_cbwr_get_auto_branch``; 14 = AVX512_E1): row blocks of a float32 product with
# neither operand transposed, at one MKL thread each, give the whole product's bits at
# one thread when each block has the grain of rows or more, starting at any row, for
# products of at most ``rows`` rows and ``inner``/``cols`` inner dimension and columns
# (MKL 2026.2 on an Intel AVX-512 Xeon: 200 products of 16-128 rows, inner 40-512, 64-512
# columns, every cut of blocks of two rows or more, unaligned row views included, and
# 32-128 rows by inner and columns of 128-2048 cut in halves; a one-row block is a
# matrix-vector product and differs, and so do halves of 192 or 256 rows with an inner
# dimension of 784 or more: MKL blocks those otherwise). The LSTM's sequence kernels
# (``ember.ops.rnn_lstm_seq``) split their batch on it; pinned by
# tests/test_lstm_numba.py. A branch not listed: not split.
MKL_ROW_GRAIN = {14: {"f": 2, "rows": 128, "inner": 2048, "cols": 2048}}
