"""`raven demo`: a guided tour that launches Raven's faces as separate processes and shows
the frames between them. Drives `raven` only from outside, as a user or an editor would;
never imports the engine or a face.
"""
