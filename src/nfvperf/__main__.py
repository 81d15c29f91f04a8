from nfvperf.cli import main

raise SystemExit(main())
