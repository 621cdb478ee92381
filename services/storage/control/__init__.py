"""The storage service's control plane: what it knows of every folder (``folders``) and the
pure rules that decide the ``cmd.vfolder.*`` commands (``deciding``). Not wired to NATS yet."""
