"""The storage service's control part, the one writer of ``ev.vfolder.*``: what it folds
(``state``), the pure rules that decide the ``cmd.vfolder.*`` commands (``rules``), and the
service that answers them and keeps the disk as the log says (``service``)."""
