"""How a model trains: input pipeline, augmentation, optimizer and schedule, loops, logs.

Device-free: nothing here picks a strategy or a precision (that is `device/`);
the entry modules pass the resolved choices in.
"""
