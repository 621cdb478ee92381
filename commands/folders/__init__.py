"""Virtual folders on the write side, decided by the storage service: the ``vfolder``
aggregate (``aggregate``, its events ``events``), the ``cmd.vfolder.*`` commands
(``messages``), the folded index every service that needs folders keeps (``index``) and who may
see or use a folder (``access``)."""
