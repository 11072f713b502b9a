package journal

import (
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"
)

// decoders decompresses DATA payloads. journald compresses a payload larger
// than its threshold (512 bytes by default) with the algorithm it was built
// with: zstd (systemd ≥ 246 on most distributions), xz (older ones) or lz4.
//   - zstd: one zstd frame (with its content size);
//   - xz: one .xz stream (lzma_stream_decoder);
//   - lz4: the uncompressed size as le64, then one raw LZ4 block.
//
// Every output is bounded by maxPayload.
type decoders struct {
	zstd *zstd.Decoder
	buf  []byte
}

func (d *decoders) decompress(algo uint8, src []byte) ([]byte, error) {
	var out []byte
	var err error
	switch algo {
	case compressedZstd:
		out, err = d.zstdDecode(src)
	case compressedXZ:
		out, err = d.xzDecode(src)
	case compressedLZ4:
		out, err = d.lz4Decode(src)
	default:
		return nil, fmt.Errorf("%w: object flags %#x name several or no algorithms", errDecompress, algo)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (d *decoders) zstdDecode(src []byte) ([]byte, error) {
	if d.zstd == nil {
		dec, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(maxPayload),
			zstd.WithDecoderMaxWindow(maxPayload))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", errDecompress, err)
		}
		d.zstd = dec
	}
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return nil, fmt.Errorf("%w: zstd: %v", errDecompress, err)
	}
	if h.HasFCS && h.FrameContentSize > maxPayload {
		return nil, fmt.Errorf("%w: zstd frame of %d bytes", errTooLarge, h.FrameContentSize)
	}
	out, err := d.zstd.DecodeAll(src, d.buf[:0])
	if err != nil {
		return nil, fmt.Errorf("%w: zstd: %v", errDecompress, err)
	}
	d.keep(out)
	return out, nil
}

func (d *decoders) xzDecode(src []byte) ([]byte, error) {
	r, err := xz.NewReader(bytes.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("%w: xz: %v", errDecompress, err)
	}
	w := bytes.NewBuffer(d.buf[:0])
	n, err := io.Copy(w, io.LimitReader(r, maxPayload+1))
	if err != nil {
		return nil, fmt.Errorf("%w: xz: %v", errDecompress, err)
	}
	if n > maxPayload {
		return nil, fmt.Errorf("%w: xz payload over %d bytes", errTooLarge, maxPayload)
	}
	out := w.Bytes()
	d.keep(out)
	return out, nil
}

func (d *decoders) lz4Decode(src []byte) ([]byte, error) {
	if len(src) <= 8 {
		return nil, fmt.Errorf("%w: lz4 payload of %d bytes", errDecompress, len(src))
	}
	size := le.Uint64(src)
	if size > maxPayload {
		return nil, fmt.Errorf("%w: lz4 payload of %d bytes", errTooLarge, size)
	}
	out := d.buf[:0]
	if uint64(cap(out)) < size {
		out = make([]byte, size)
	}
	out = out[:size]
	n, err := lz4.UncompressBlock(src[8:], out)
	if err != nil {
		return nil, fmt.Errorf("%w: lz4: %v", errDecompress, err)
	}
	if uint64(n) != size {
		return nil, fmt.Errorf("%w: lz4: %d bytes decompressed, %d announced", errDecompress, n, size)
	}
	d.keep(out)
	return out, nil
}

// keep reuses the output buffer for the next payload, unless it grew large
// (a rare huge field should not pin its memory).
func (d *decoders) keep(out []byte) {
	if cap(out) <= 1<<20 {
		d.buf = out[:0]
	} else {
		d.buf = nil
	}
}

func (d *decoders) close() {
	if d.zstd != nil {
		d.zstd.Close()
		d.zstd = nil
	}
}
