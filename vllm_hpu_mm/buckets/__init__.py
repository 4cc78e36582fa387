"""Vision-encoder buckets: the list (``spec``), the oversize policy (``policy``), mapping and packing images into
bucket passes (``packing``), coverage of the pixel range (``coverage``), the exact planner (``planner``), where image
sizes come from (``sizes``), a list against sizes with the policy applied (``workload``) and the histogram (``plot``).

Nothing is imported here: ``envs`` imports ``spec`` and ``policy`` and must stay cheap.
"""
