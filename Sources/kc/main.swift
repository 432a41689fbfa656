// The entry point (see KC).
KC.main()
