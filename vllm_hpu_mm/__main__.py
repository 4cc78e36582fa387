import sys

from vllm_hpu_mm.cli.main import main

sys.exit(main())
