"""The pipeline layer: what happens to a chat request between the HTTP edge and the memory.

The edge hands in a ``ChatCall`` and gets back what to forward
(``prepare``); after the response it hands in the upstream's ``Reply``
(``record``). Below this layer sit context and memory; nothing here knows
HTTP: the compression model's call comes in through the constructor.

- ``chat_call``: the call and the reply, as the pipeline sees them
- ``pipeline_protocol``: the ``Pipeline`` interface and what ``prepare`` returns
- ``plain``: the pipeline without memory (counting)
- ``memory_pipeline``: the memory pipeline (context window, recall, recording)
- ``memory_layer``: the memory layer as one collaborator, either there or not
- ``bounded_pipeline``: the memory pipeline under load: prepares and records bounded

This file imports nothing: ``from proxy.pipeline.chat_call import ChatCall`` must
not pull in the memory pipeline.
"""
