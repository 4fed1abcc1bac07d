"""Writes the files tests/test_data.c reads, with NumPy, Python's csv module and Pillow (not
nabla): NPY arrays, CSV files and a folder of PNG images. Usage: data_ref.py OUT_DIR"""
import csv
import os
import sys

import numpy as np
from PIL import Image

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

# NPY: x f32 [5, 3] = arange * 0.5, y i32 [5] (cast to i64 by nb_data_npy), x64 f64 Fortran order.
x = (np.arange(15, dtype=np.float32) * 0.5).reshape(5, 3)
np.save(os.path.join(out, "x.npy"), x)
np.save(os.path.join(out, "y.npy"), np.array([4, 3, 2, 1, 0], dtype=np.int32))

# CSV by NumPy: header "label,a,b,c", label first, then x.
data = np.concatenate([np.array([[4], [3], [2], [1], [0]], dtype=np.float32), x], axis=1)
np.savetxt(os.path.join(out, "numpy.csv"), data, delimiter=",", header="label,a,b,c", comments="", fmt="%g")

# CSV by the csv module with every field quoted, a label column named "class" in the middle,
# CRLF line ends and a quoted header name holding a comma and a quote.
with open(os.path.join(out, "quoted.csv"), "w", newline="") as f:
    w = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\r\n")
    w.writerow(['feat, "one"', "class", "two"])
    for i in range(4):
        w.writerow([f"{i * 1.5}", str(i % 2), f"{-i}"])

# PNG folder: class "a" holds 8-bit gray images, class "b" RGB; pixel (i, j) of channel c is
# (7 i + 3 j + 50 c + k) mod 256 for image k.
for cls, mode in (("a", "L"), ("b", "RGB")):
    os.makedirs(os.path.join(out, "images", cls), exist_ok=True)
    for k in range(3):
        ch = 1 if mode == "L" else 3
        i, j = np.meshgrid(np.arange(6), np.arange(5), indexing="ij")
        img = np.stack([(7 * i + 3 * j + 50 * c + k) % 256 for c in range(ch)], axis=-1).astype(np.uint8)
        Image.fromarray(img[..., 0] if ch == 1 else img, mode).save(os.path.join(out, "images", cls, f"img{k}.png"))
# JPEGs by Pillow (libjpeg underneath), RGB 4:2:0 and gray, with the pixels Pillow decodes them to
# (HWC, as NPY): nabla's JPEG reader must give the same values.
rng = np.random.default_rng(7)
for name, mode, shape in (("rgb", "RGB", (9, 13, 3)), ("gray", "L", (9, 13))):
    path = os.path.join(out, f"photo_{name}.jpg")
    Image.fromarray(rng.integers(0, 256, shape).astype(np.uint8), mode).save(path, quality=85)
    np.save(os.path.join(out, f"photo_{name}.npy"), np.asarray(Image.open(path).convert(mode)))
print("wrote", out)

# Resize and channel references from torch (not nabla): bilinear, align_corners=False, no
# antialiasing, down and up; torchvision's luma weights for RGB -> gray.
import torch
import torch.nn.functional as F
src = (torch.arange(2 * 5 * 7, dtype=torch.float32).reshape(2, 5, 7) * 0.37) % 3.1
np.save(os.path.join(out, "resize_src.npy"), src.numpy())
for h, w in ((3, 4), (9, 11), (5, 7)):
    r = F.interpolate(src[None], size=(h, w), mode="bilinear", align_corners=False, antialias=False)[0]
    np.save(os.path.join(out, f"resize_{h}x{w}.npy"), r.numpy())
rgb = torch.rand(3, 4, 5, generator=torch.Generator().manual_seed(0))
np.save(os.path.join(out, "rgb_src.npy"), rgb.numpy())
np.save(os.path.join(out, "rgb_gray.npy"), (0.2989 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2])[None].numpy())
