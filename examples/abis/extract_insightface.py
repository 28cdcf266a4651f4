#!/usr/bin/env python3
"""An idface abis extractor (docs/ABIS.md, "The extractor contract") with an
InsightFace ArcFace model: an ISO/IEC 19794-5 face record on stdin, the
512-d template as a JSON array on stdout; exit 3 when no face is found.

    idface abis ... --extractor 'python3 examples/abis/extract_insightface.py'

Needs: pip install insightface onnxruntime opencv-python-headless numpy, and
the model pack the operator chose (INSIGHTFACE_MODEL, default buffalo_l,
fetched by insightface into ~/.insightface on first use; no weights ship
with idface). The cluster must have been set up for the same model's
dimension and calibrated with it (idface calibrate).
"""
import json
import os
import struct
import sys


def image_of(record: bytes) -> bytes:
    """The image data of the first face of an ISO/IEC 19794-5 record
    (2005 "010" or 2011 "030" layouts)."""
    if record[:4] != b"FAC\x00":
        raise ValueError("not an ISO/IEC 19794-5 record")
    version = record[4:8]
    if version == b"010\x00":
        # general header 14, facial header 20 + 8 per feature point, image info 12
        points = struct.unpack(">H", record[18:20])[0]
        start = 14 + 20 + 8 * points + 12
        length = struct.unpack(">I", record[14:18])[0]
        return record[start:14 + length]
    # 2011: find the JPEG or JPEG 2000 signature; the representation
    # headers vary with the blocks present.
    for sig in (b"\xff\xd8\xff", b"\x00\x00\x00\x0cjP  ", b"\xff\x4f\xff\x51"):
        at = record.find(sig)
        if at >= 0:
            return record[at:]
    raise ValueError("no JPEG or JPEG 2000 image in the record")


def main() -> int:
    record = sys.stdin.buffer.read()
    try:
        import cv2
        import numpy as np
        from insightface.app import FaceAnalysis
    except ImportError as e:
        print(f"extractor: {e}: pip install insightface onnxruntime opencv-python-headless", file=sys.stderr)
        return 1
    img = cv2.imdecode(np.frombuffer(image_of(record), np.uint8), cv2.IMREAD_COLOR)
    if img is None:
        print("extractor: the image does not decode", file=sys.stderr)
        return 3
    app = FaceAnalysis(name=os.environ.get("INSIGHTFACE_MODEL", "buffalo_l"), providers=["CPUExecutionProvider"])
    app.prepare(ctx_id=-1, det_size=(640, 640))
    faces = app.get(img)
    if len(faces) != 1:
        print(f"extractor: {len(faces)} faces found, want one", file=sys.stderr)
        return 3
    json.dump([float(v) for v in faces[0].normed_embedding], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
