import sys

from canalbridge.daemon.cli import main

sys.exit(main())
