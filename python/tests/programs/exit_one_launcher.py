"""A launcher like torchrun, as far as dltune can tell: it runs the program in a child process with its descriptors
above 2 closed (subprocess's default), passes SIGTERM on, and exits with status 0 when the child succeeded and 1
however else it ended (a stop's 75 included)."""
import signal
import subprocess
import sys

child = subprocess.Popen(sys.argv[1:])
signal.signal(signal.SIGTERM, lambda signum, frame: child.send_signal(signum))
sys.exit(0 if child.wait() == 0 else 1)
