//go:build amd64 && !purego

#include "textflag.h"

// func fillSeqAVX2(dst *int64, n int, v, step int64)
//
// Sets dst[j] = v + j*step for j in [0, n). Y0..Y3 hold the next sixteen
// records, four each, and Y4 sixteen steps in every lane: a loop turn stores
// the four vectors and adds Y4 to each. VPADDQ wraps as Go's int64 addition
// does, and v + j*step wraps to the same value whether it is computed at
// once or as a sum of steps, so the records are fillSeqGo's exactly. Stores
// are unaligned (VMOVDQU): a batch starts wherever its slice does.
TEXT ·fillSeqAVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         n+8(FP), CX
	MOVQ         v+16(FP), AX
	MOVQ         step+24(FP), DX

	// Y0 = [v, v+step, v+2*step, v+3*step]. VMOVQ, not MOVQ: a legacy
	// SSE instruction here could pay an SSE/AVX transition.
	VMOVQ        AX, X0
	LEAQ         (AX)(DX*1), BX
	VPINSRQ      $1, BX, X0, X0
	LEAQ         (AX)(DX*2), BX
	VMOVQ        BX, X1
	ADDQ         DX, BX
	VPINSRQ      $1, BX, X1, X1
	VINSERTI128  $1, X1, Y0, Y0

	// Y4 = 4*step in every lane; Y1..Y3 follow Y0 by four records each;
	// then Y4 = 16*step, the advance of a loop turn.
	MOVQ         DX, BX
	SHLQ         $2, BX
	VMOVQ        BX, X4
	VPBROADCASTQ X4, Y4
	VPADDQ       Y4, Y0, Y1
	VPADDQ       Y4, Y1, Y2
	VPADDQ       Y4, Y2, Y3
	VPADDQ       Y4, Y4, Y4
	VPADDQ       Y4, Y4, Y4

	CMPQ         CX, $16
	JB           tail8

loop16:
	VMOVDQU      Y0, (DI)
	VMOVDQU      Y1, 32(DI)
	VMOVDQU      Y2, 64(DI)
	VMOVDQU      Y3, 96(DI)
	VPADDQ       Y4, Y0, Y0
	VPADDQ       Y4, Y1, Y1
	VPADDQ       Y4, Y2, Y2
	VPADDQ       Y4, Y3, Y3
	ADDQ         $128, DI
	SUBQ         $16, CX
	CMPQ         CX, $16
	JAE          loop16

	// Fewer than sixteen records left: Y0..Y3 still hold them, in order.
tail8:
	CMPQ         CX, $8
	JB           tail4
	VMOVDQU      Y0, (DI)
	VMOVDQU      Y1, 32(DI)
	VMOVDQA      Y2, Y0
	VMOVDQA      Y3, Y1
	ADDQ         $64, DI
	SUBQ         $8, CX

tail4:
	CMPQ         CX, $4
	JB           tail1
	VMOVDQU      Y0, (DI)
	VMOVDQA      Y1, Y0
	ADDQ         $32, DI
	SUBQ         $4, CX

	// At most three records left, from the low lane of Y0 on, one by one.
tail1:
	VMOVQ        X0, AX
	VZEROUPPER
	TESTQ        CX, CX
	JZ           done

loop1:
	MOVQ         AX, (DI)
	ADDQ         DX, AX
	ADDQ         $8, DI
	DECQ         CX
	JNZ          loop1

done:
	RET
