"""Read arrays back out of a plotly figure spec (plotly sends numpy arrays as base64 typed arrays)."""

import base64

import numpy as np

DTYPES = {"f4": np.float32, "f8": np.float64, "i1": np.int8, "i2": np.int16, "i4": np.int32, "u1": np.uint8}


def array(value) -> np.ndarray:
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=DTYPES[value["dtype"]])
        shape = [int(s) for s in str(value.get("shape", len(flat))).split(",")]
        return flat.reshape(shape)
    return np.asarray(value, dtype=float)
