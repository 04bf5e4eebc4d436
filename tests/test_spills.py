"""probes.spills' reading of a SASS listing (ptxas and cuobjdump are not needed): spill stores
and loads placed by the tensor-core products before them."""

from probes import spills

SASS = """
        /*0010*/                   STL [R1+0x7c], R3 ;
        /*0020*/                   STL.64 [R1+0xa8], R4 ;
        /*0030*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8], R24 ;
        /*0040*/                   LDL R0, [R1+0x7c] ;
        /*0050*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8], R24, gsb0 ;
        /*0060*/                   LDL.64 R138, [R1+0xa8] ;
        /*0070*/                   LDL.LU R136, [R1+0x28] ;
        /*0080*/                   STS [R2], R5 ;
        /*0090*/                   LDS R6, [R2] ;
        /*00a0*/                   STL [R1+0x28], R7 ;
"""


def test_spills_are_placed_by_the_products_before_them():
  products, found = spills.by_products(SASS)
  assert products == 2
  assert found == [("STL", 0), ("STL", 0), ("LDL", 1), ("LDL", 2), ("LDL", 2), ("STL", 2)]
  assert spills.tally(found) == [("STL", 0, 2), ("LDL", 1, 1), ("LDL", 2, 2), ("STL", 2, 1)]


PTX = """
\tor.b64 \t%rd10, %rd9, 4611686293305294848;
\tor.b64 \t%rd14, %rd9, -4611686293305294848;
\twgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%r1}, %rd14, %rd11, p, 1, 1, 0, 1;
$L__BB0_4:
\tadd.s64 \t%rd12, %rd9, 4611686293305294850;
\tadd.s64 \t%rd13, %rd9, 64;
\twgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%r1}, %rd12, %rd13, p, 1, 1, 0, 1;
\twgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%r1}, %rd10, %rd11, p, 1, 1, 0, 1;
$L__BB0_5:
\t@%p2 bra \t$L__BB0_5;
\t@%p1 bra \t$L__BB0_4;
\t@%p1 bra \t$L__BB0_6;
$L__BB0_6:
"""


def test_descriptors_are_placed_by_the_longest_loop():
  # %rd10 built before the loop and used in it (hoisted); %rd12 built in it; %rd14 (printed
  # negative) used only before it; %rd13 (an add of 64) no descriptor. The short spin loop at
  # $L__BB0_5 is not the step's.
  assert spills.descriptors(PTX) == (1, 1, 2)
