"""Tools around greyhound's reports (plots). Runs with Debian's /usr/bin/python3 and its python3-matplotlib."""
