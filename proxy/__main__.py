from .commands.main import main

raise SystemExit(main())
