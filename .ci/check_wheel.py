"""Lists a wheel's files and fails if it holds anything but the library and its metadata."""

import sys
import zipfile

(wheel,) = sys.argv[1:]
names = zipfile.ZipFile(wheel).namelist()
print("\n".join(names))
stray = [n for n in names if not n.startswith(("keras_attn_rnn/", "keras_attn_rnn-"))]
stray += [n for n in names if not n.endswith((".py", "/")) and ".dist-info/" not in n]
if stray:
    sys.exit(f"{wheel} holds files outside the library (tests, configs, docs?): {stray}")
print(f"{wheel}: {len(names)} files, the library only")
