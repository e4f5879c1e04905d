# ctl.sh: mcclctl checks (filled in once mcclctl exists)
