"""The commands that read the repository and change nothing: ``verify``, ``sql``, ``log``.

``verify`` checks each chain's integrity and replays its transforms, ``sql`` runs one
read-only query over every dataset's rows, ``log`` renders a chain's blocks. None of them
writes a block, a file or a ref.
"""
