"""Prints the folders, ;-separated, holding an nccl.h of the NVIDIA packages installed beside this Python's torch
(a pip torch's NCCL comes as one of them): where CMakeLists.txt looks for NCCL's header."""
import glob
import os
import site

folders = set()
for packages in site.getsitepackages() + [site.getusersitepackages()]:
    for header in glob.glob(os.path.join(packages, "nvidia", "**", "nccl.h"), recursive=True):
        folders.add(os.path.dirname(header))
print(";".join(sorted(folders)))
