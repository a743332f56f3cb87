"""The Faust worker's stages, one module each, in the order a record flows through them.

``source`` (``__consumer_offsets`` -> derived events) -> ``storage`` (derived
events -> changelog tables) -> ``end_offsets`` (ListOffsets -> partition lag)
-> ``evaluator`` (lag -> recommendations) ; ``views`` serves what they hold;
``changelog`` batches every stage's table writes.
Each module's ``install`` wires its part onto the app; the computing is done
by kagent's pure cores.
"""
