"""The pipeline layer: what happens to a chat request between the HTTP edge and the memory.

The edge hands in a ``ChatCall`` and gets back what to forward
(``prepare``); after the response it hands in the upstream's ``Reply``
(``record``). Below this layer sit context and memory; nothing here knows
HTTP: the compression model's call comes in through the constructor.

- ``call``: the call and the reply, as the pipeline sees them
- ``protocol``: the ``Pipeline`` interface and what ``prepare`` returns
- ``plain``: the pipelines without memory (counting, and starting)
- ``memory``: the memory pipeline (context window, recall, recording)
- ``layer``: the memory layer as one collaborator, either there or not
- ``thread``: the memory pipeline served from a thread of its own, records bounded

This file imports nothing: ``from proxy.pipeline.call import ChatCall`` must
not pull in the memory pipeline.
"""
