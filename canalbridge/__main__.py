import sys

from canalbridge.cli import main

sys.exit(main())
